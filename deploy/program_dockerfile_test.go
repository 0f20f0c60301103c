package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfileLines returns the instructions of a Dockerfile whose keyword is
// kw (e.g. "FROM"), their arguments trimmed.
func dockerfileLines(text, kw string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), kw+" "); ok {
			out = append(out, strings.TrimSpace(rest))
		}
	}
	return out
}

// TestProgramDockerfileIsLikeMcpgrains: the image of an SDK program
// (examples/hello/Dockerfile, the pattern docs/guide.md shows) is built
// and laid out as deploy/Dockerfile builds mcpgrain's — the same builder
// and runtime images, the same static build line but for the package and
// the output, non-root, the same ports — and keeps the contract the Helm
// chart depends on: the entrypoint is the program itself (the binary the
// build wrote, copied) and the default command is "node".
func TestProgramDockerfileIsLikeMcpgrains(t *testing.T) {
	ref, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "examples", "hello", "Dockerfile")
	prog, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, p := string(ref), string(prog)
	for _, kw := range []string{"FROM", "USER", "EXPOSE", "CMD", "WORKDIR"} {
		if got, want := dockerfileLines(p, kw), dockerfileLines(r, kw); !slices.Equal(got, want) {
			t.Errorf("%s: %s %q, deploy/Dockerfile %q", path, kw, got, want)
		}
	}
	if got := dockerfileLines(p, "CMD"); !slices.Equal(got, []string{`["node"]`}) {
		t.Errorf("%s: CMD %q, want [\"node\"] (the chart passes node and its flags as arguments)", path, got)
	}
	// The build line: deploy/Dockerfile's, with the program's package
	// instead of ./cmd/mcpgrain.
	refBuild, progBuild := buildLines(r), buildLines(p)
	if len(refBuild) != 1 || len(progBuild) != 1 {
		t.Fatalf("want one `CGO_ENABLED=0 go build` in each Dockerfile: %q, %q", refBuild, progBuild)
	}
	want := slices.Clone(refBuild[0])
	want[len(want)-1] = "./examples/hello"
	if !slices.Equal(progBuild[0], want) {
		t.Errorf("%s builds with\n  %q\nwant deploy/Dockerfile's line for its package\n  %q", path, progBuild[0], want)
	}
	// The entrypoint is the binary the build wrote.
	out := regexp.MustCompile(`go build .* -o (\S+) `).FindStringSubmatch(p)
	cp := regexp.MustCompile(`(?m)^COPY --from=build (\S+) (\S+)$`).FindStringSubmatch(p)
	entry := dockerfileLines(p, "ENTRYPOINT")
	switch {
	case out == nil || cp == nil || cp[1] != out[1]:
		t.Errorf("%s: the runtime stage does not copy the built binary (build -o %v, COPY %v)", path, out, cp)
	case !slices.Equal(entry, []string{`["` + cp[2] + `"]`}):
		t.Errorf("%s: ENTRYPOINT %q, want [%q]: the chart runs the entrypoint as the program", path, entry, cp[2])
	}
}
