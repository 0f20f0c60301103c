package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Secrets on the command line are readable by every local user (ps,
// /proc/<pid>/cmdline) and by anything that prints a process's arguments
// (a profiler's cmdline page, crash reports, shell history). Every flag
// that carries a secret therefore has two other ways in: a <flag>-file
// twin that names a file holding the value (the file's content, surrounding
// whitespace trimmed), and, like every flag, its MCPGRAIN_<FLAG> variable
// (MCPGRAIN_<FLAG>_FILE for the twin).

// secretFileFlags are the flags that get a -file twin.
var secretFileFlags = []string{"token", "state-key", "store", "oauth-introspection-secret", "oauth-client-secret"}

// maxSecretFile bounds what a -file flag reads.
const maxSecretFile = 64 << 10

// addSecretFiles registers the -file twin of each flag in secretFileFlags
// that fs has. Call it after the flags themselves are registered.
func addSecretFiles(fs *flag.FlagSet) {
	for _, name := range secretFileFlags {
		if fs.Lookup(name) == nil {
			continue
		}
		fs.String(name+"-file", "", fmt.Sprintf("file holding the value of --%s (keeps it off the command line; surrounding whitespace is trimmed)", name))
	}
}

// resolveSecrets runs after parse: it reads each -file twin that is set
// into its flag (both set is a usage error) and, with warn, writes a
// warning to stderr for every secret given on the command line itself.
func resolveSecrets(fs *flag.FlagSet, stderr io.Writer, cmd string, warn bool) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var errs []error
	for _, name := range secretFileFlags {
		f, file := fs.Lookup(name), fs.Lookup(name+"-file")
		if f == nil || file == nil || file.Value.String() == "" {
			continue
		}
		if f.Value.String() != "" {
			// The command line wins over the environment; the same level
			// twice is a mistake.
			if onCommandLine[name] == onCommandLine[name+"-file"] {
				errs = append(errs, fmt.Errorf("%w: --%s and --%s-file (or %s and %s_FILE) both set: use one", errUsage, name, name, envName(name), envName(name)))
				continue
			}
			if onCommandLine[name] {
				continue
			}
		}
		v, err := readSecretFile(file.Value.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: --%s-file: %v", errUsage, name, err))
			continue
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%w: --%s-file: %v", errUsage, name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !warn {
		return nil
	}
	fs.Visit(func(f *flag.Flag) { // flags given on the command line only
		if why := secretOnCommandLine(f.Name, f.Value.String()); why != "" {
			fmt.Fprintf(stderr, "mcpgrain %s: warning: %s on the command line is readable by every local user (ps, /proc/<pid>/cmdline); %s\n", cmd, why, alternative(f.Name))
		}
	})
	warnOpenSecretFiles(fs, stderr, cmd)
	return nil
}

// warnOpenSecretFiles warns about secret files (the -file twins and
// --keys-file) that every local user may read or write. Group access is
// left alone: a Kubernetes Secret mounted for the pod's group is 0440.
func warnOpenSecretFiles(fs *flag.FlagSet, stderr io.Writer, cmd string) {
	names := []string{"keys-file"}
	for _, name := range secretFileFlags {
		names = append(names, name+"-file")
	}
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil || f.Value.String() == "" {
			continue
		}
		if mode, open := worldAccessible(f.Value.String()); open {
			fmt.Fprintf(stderr, "mcpgrain %s: warning: --%s %s is readable or writable by every local user (mode %04o); chmod 600 it\n", cmd, name, f.Value.String(), mode.Perm())
		}
	}
}

// worldAccessible reports whether others (not owner, not group) may read
// or write the file at path, and its mode.
func worldAccessible(path string) (os.FileMode, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, false // reading it reports the error
	}
	return st.Mode(), st.Mode().Perm()&0o006 != 0
}

// secretOnCommandLine says what secret the flag's value carries ("" if
// none): the token and state key always, a store DSN or a tool source URL
// when it holds a password.
func secretOnCommandLine(name, value string) string {
	switch name {
	case "token", "state-key", "oauth-introspection-secret", "oauth-client-secret":
		if value != "" {
			return "--" + name
		}
	case "store":
		if dsnHasPassword(value) {
			return "the password in --store"
		}
	case "openapi", "upstream":
		if urlUserinfo.MatchString(value) {
			return "the credentials in --" + name
		}
	}
	return ""
}

// urlUserinfo matches a URL that carries userinfo (user:password@ or
// token@) before its host.
var urlUserinfo = regexp.MustCompile(`://[^/?#@\s]+@`)

// alternative is the advice for a secret flag.
func alternative(name string) string {
	switch name {
	case "openapi", "upstream":
		return "put the source in a --sources file, whose header values may read ${ENV} variables"
	}
	return fmt.Sprintf("use --%s-file or %s", name, envName(name))
}

// dsnHasPassword reports whether a store DSN carries a password: in its
// URL userinfo or as a password= keyword.
func dsnHasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	if u, err := url.Parse(dsn); err == nil && u.Query().Get("password") != "" {
		return true
	}
	return strings.Contains(dsn, "password=")
}

// readSecretFile reads a secret from path: at most maxSecretFile bytes,
// surrounding whitespace trimmed, not empty.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}
