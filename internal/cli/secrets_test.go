package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSecret writes a secret file (mode 600) and returns its path.
func writeSecret(t *testing.T, name, v string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Secrets given on a command line are readable by every local user (and
// were served by /debug/pprof/cmdline). Every secret flag has a -file twin
// and its MCPGRAIN_ variable; a node warns about secrets on its command
// line; dev does not.
func TestSecretsComeFromFilesOrTheEnvironment(t *testing.T) {
	const token, key = "mcpg_file_token_0123456789", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	// The store is unreachable on purpose: reaching it proves every other
	// setting was accepted (and --store-file was read).
	store := writeSecret(t, "store", "postgres://u:secret-pw@127.0.0.1:1/db?connect_timeout=1")
	node := func(env map[string]string, args ...string) (int, string) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		var errOut bytes.Buffer
		code := run(append([]string{"node", "--http", "127.0.0.1:0", "--grpc", "", "--consul", ""}, args...), io.Discard, &errOut)
		return code, errOut.String()
	}
	reached := func(code int, out string) bool {
		return code == 1 && strings.Contains(out, "cannot reach postgres at postgres://u:***@127.0.0.1:1")
	}

	code, out := node(nil, "--token-file", writeSecret(t, "token", token), "--state-key-file", writeSecret(t, "key", key), "--store-file", store)
	if !reached(code, out) || strings.Contains(out, "warning") {
		t.Fatalf("secrets from files: exit %d, stderr %q; want the store reached, no warning", code, out)
	}
	code, out = node(map[string]string{"MCPGRAIN_TOKEN": token, "MCPGRAIN_STATE_KEY": key, "MCPGRAIN_STORE_FILE": store})
	if !reached(code, out) || strings.Contains(out, "warning") {
		t.Fatalf("secrets from the environment: exit %d, stderr %q", code, out)
	}
	t.Setenv("MCPGRAIN_TOKEN", "")
	t.Setenv("MCPGRAIN_STATE_KEY", "")
	t.Setenv("MCPGRAIN_STORE_FILE", "")

	// On the command line they still work, with a warning each.
	code, out = node(nil, "--token", token, "--state-key", key, "--store", "postgres://u:secret-pw@127.0.0.1:1/db?connect_timeout=1",
		"--upstream", "gh=https://user:pat@mcp.example.com/mcp")
	if !reached(code, out) {
		t.Fatalf("secrets on the command line: exit %d, stderr %q", code, out)
	}
	for _, want := range []string{"warning: --token on the command line", "use --token-file or MCPGRAIN_TOKEN", "warning: --state-key on the command line",
		"warning: the password in --store", "warning: the credentials in --upstream"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, token) || strings.Contains(out, key) || strings.Contains(out, "secret-pw") || strings.Contains(out, "pat@") {
		t.Errorf("a warning repeats the secret:\n%s", out)
	}

	// The command line wins over the environment; a flag and its twin at
	// the same level are a mistake; a file must hold something.
	t.Setenv("MCPGRAIN_TOKEN", "mcpg_env_token_0123456789")
	if code, out := node(nil, "--token-file", writeSecret(t, "token2", token), "--state-key", key, "--store-file", store); !reached(code, out) {
		t.Fatalf("--token-file over MCPGRAIN_TOKEN: exit %d, stderr %q", code, out)
	}
	t.Setenv("MCPGRAIN_TOKEN", "")
	if code, out := node(nil, "--token", token, "--token-file", writeSecret(t, "token3", token), "--state-key", key, "--store-file", store); code != 2 || !strings.Contains(out, "--token and --token-file") {
		t.Fatalf("--token with --token-file: exit %d, stderr %q", code, out)
	}
	if code, out := node(nil, "--token-file", writeSecret(t, "empty", ""), "--state-key", key, "--store-file", store); code != 2 || !strings.Contains(out, "is empty") {
		t.Fatalf("an empty token file: exit %d, stderr %q", code, out)
	}

	// dev is for local experiments: no warning.
	var errOut bytes.Buffer
	if code := run([]string{"dev", "--http", "127.0.0.1:99999", "--token", token}, io.Discard, &errOut); code != 2 || strings.Contains(errOut.String(), "warning") {
		t.Fatalf("dev --token: exit %d, stderr %q", code, errOut.String())
	}
}

// A secret file every local user may read is read, with a warning naming
// the flag and the mode (not the secret); one readable by its group only
// (a Kubernetes Secret mounted 0440) is not warned about.
func TestOpenSecretFilesAreWarnedAbout(t *testing.T) {
	const token, key = "mcpg_file_token_0123456789", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	store := writeSecret(t, "store", "postgres://u:secret-pw@127.0.0.1:1/db?connect_timeout=1")
	open := writeSecret(t, "token", token)
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	group := writeSecret(t, "key", key)
	if err := os.Chmod(group, 0o440); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	code := run([]string{"node", "--http", "127.0.0.1:0", "--grpc", "", "--consul", "", "--token-file", open, "--state-key-file", group, "--store-file", store}, io.Discard, &errOut)
	out := errOut.String()
	if code != 1 || !strings.Contains(out, "cannot reach postgres") {
		t.Fatalf("exit %d, stderr %q; want the store reached", code, out)
	}
	if !strings.Contains(out, "warning: --token-file "+open+" is readable or writable by every local user (mode 0644)") {
		t.Errorf("no warning for the world-readable token file:\n%s", out)
	}
	if strings.Contains(out, "--state-key-file") || strings.Contains(out, token) {
		t.Errorf("warned about the group-readable key file, or repeated the secret:\n%s", out)
	}
}
