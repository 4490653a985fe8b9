package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/internal/text"
	"github.com/converge-lab/converge/internal/userfile"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
)

// defaultTestRun selects the tests that run scenarios in a compiled test
// binary: TestScenarios, as scenariotest's doc names it.
const defaultTestRun = "^TestScenarios$"

// tests is a compiled test binary whose tests run scenarios through
// scenariotest: this repository's (the scaler's catalogue) or a user's.
type tests struct {
	bin string
	// dir is the folder the binary runs in: its package's, where its
	// relative paths (testdata/...) resolve.
	dir string
	// run selects the tests that run scenarios (-test.run).
	run string
	// flag is how to name this binary again on a command line ("" for the
	// default, the scaler's).
	flag string
	// replayPackage or replayBinary name these tests from where converge
	// was started, for the replay commands runs record: go test of the
	// package, or the binary run directly.
	replayPackage, replayBinary string
}

// invocation is what every process of these tests is asked, before what
// each asks of its own: how to name the tests in a replay command.
func (t *tests) invocation() invocation.Invocation {
	inv := invocation.Default()
	inv.ReplayPackage, inv.ReplayBinary = t.replayPackage, t.replayBinary
	return inv
}

// fromHere is path as a command run in converge's folder names it:
// ./relative below that folder, else absolute (a package's folder may be
// ../relative, as go test takes it).
func fromHere(path string, pkg bool) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	rel, err := filepath.Rel(wd, abs)
	switch {
	case err != nil:
		return abs
	case rel == ".":
		return "."
	case !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != "..":
		return "./" + filepath.ToSlash(rel)
	case pkg:
		return filepath.ToSlash(rel)
	}
	return abs
}

// findTests finds or builds the compiled tests the flags name: --package
// builds that package's tests, --test-binary is taken as it is, and neither
// means the scaler's catalogue.
func findTests(ctx context.Context, f runFlags, stderr io.Writer) (*tests, error) {
	t := &tests{run: f.testRun}
	if t.run == "" {
		t.run = defaultTestRun
	}
	if t.run != defaultTestRun {
		t.flag = " --test-run " + text.ShellQuote(t.run)
	}
	switch {
	case f.pkg != "":
		bin, dir, err := buildPackage(ctx, f.pkg, stderr)
		if err != nil {
			return nil, err
		}
		t.bin, t.dir = bin, dir
		t.flag = " --package " + text.ShellQuote(f.pkg) + t.flag
		// As the user named it: go test reads it from where they stand.
		t.replayPackage = f.pkg
	case f.testBinary != "":
		abs, err := filepath.Abs(f.testBinary)
		if err != nil {
			return nil, err
		}
		// A user's binary resolves its relative paths from where converge
		// was started, as go test would from the package's folder.
		t.bin, t.dir = abs, ""
		t.flag = " --test-binary " + text.ShellQuote(abs) + t.flag
		t.replayBinary = fromHere(abs, false)
	default:
		bin, pkg, err := scalerTests(ctx, stderr)
		if err != nil {
			return nil, err
		}
		t.bin, t.dir = bin, filepath.Dir(bin)
		if pkg != "" {
			t.replayPackage = fromHere(pkg, true)
		} else {
			t.replayBinary = fromHere(bin, false)
		}
	}
	return t, nil
}

// buildPackage compiles a package's tests with go test -c into the user's
// cache, one binary per package folder, and returns it with that folder.
func buildPackage(ctx context.Context, pkg string, stderr io.Writer) (bin, dir string, err error) {
	var out, errOut bytes.Buffer
	list := newChild(ctx, "go list of "+pkg, "go", "list", "-f", "{{.Dir}}", pkg)
	list.Stdout, list.Stderr = &out, &errOut
	if err := list.Run(); err != nil {
		return "", "", usageError{fmt.Errorf("--package %s: %v: %s", pkg, err, strings.TrimSpace(errOut.String()))}
	}
	dirs := strings.Fields(out.String())
	if len(dirs) != 1 {
		return "", "", usageError{fmt.Errorf("--package %s names %d packages; name one", pkg, len(dirs))}
	}
	dir = dirs[0]
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(dir))
	bin = filepath.Join(cache, "converge", "tests", filepath.Base(dir)+"-"+hex.EncodeToString(sum[:6])+".test")
	fmt.Fprintf(stderr, "building the tests of %s into %s\n", dir, bin)
	build := newChild(ctx, "the build of the tests of "+dir, "go", "test", "-c", "-o", bin, ".")
	build.Dir = dir
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return "", "", fmt.Errorf("building the tests of %s: %w", pkg, err)
	}
	return bin, dir, nil
}

// scalerTests finds or builds this repository's compiled scenario tests:
// the binary, and the folder of its package when it was built from there
// (a replay is go test of that package; it is the binary otherwise).
func scalerTests(ctx context.Context, stderr io.Writer) (bin, pkg string, err error) {
	if env := os.Getenv("CONVERGE_SCENARIOS_TEST"); env != "" {
		return env, "", nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "converge-scenarios.test")
		if _, err := os.Stat(next); err == nil {
			return next, "", nil
		}
	}
	// Inside the source tree: build it.
	root, err := moduleRoot()
	if err != nil {
		return "", "", fmt.Errorf("no compiled scenario tests: build them with `make build` (bin/converge-scenarios.test) or pass --test-binary or --package: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "converge", "converge-scenarios.test")
	fmt.Fprintln(stderr, "building the scenario tests into", out)
	cmd := newChild(ctx, "the build of the scenario tests", "go", "test", "-c", "-o", out, "./scenarios")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("building the scenario tests: %w", err)
	}
	return out, filepath.Join(root, "scenarios"), nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := userfile.ReadFile(filepath.Join(dir, "go.mod"), 0)
		if err == nil && strings.Contains(string(data), "module github.com/converge-lab/converge\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the converge source tree")
		}
		dir = parent
	}
}

// listTimeout bounds listing a binary's scenarios: it loads files and
// runs nothing.
const listTimeout = 2 * time.Minute

// list asks the binary for the scenarios its tests run: their own, or
// with files, those files' scenarios under the tests' controllers.
func (t *tests) list(ctx context.Context, files []string) ([]scenariotest.Listed, error) {
	cache := t.listCache(files)
	if cache != "" {
		var listed []scenariotest.Listed
		if data, err := os.ReadFile(cache); err == nil && json.Unmarshal(data, &listed) == nil && len(listed) > 0 {
			return listed, nil
		}
	}
	listed, err := t.listNow(ctx, files)
	if err == nil && cache != "" {
		if data, err := json.Marshal(listed); err == nil && os.MkdirAll(filepath.Dir(cache), 0o755) == nil {
			// Written whole then renamed: a reader never sees half a file.
			tmp := fmt.Sprintf("%s.%d", cache, os.Getpid())
			if os.WriteFile(tmp, data, 0o644) == nil {
				_ = os.Rename(tmp, cache)
			}
		}
	}
	return listed, err
}

// listCache is where the listing of this binary, as it is now, with these
// files as they are now, is kept ("" when it cannot be kept): a listing
// starts a process, a third of a short campaign's time.
func (t *tests) listCache(files []string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.New()
	stamp := func(path string) bool {
		st, err := os.Stat(path)
		if err != nil {
			return false
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", path, st.Size(), st.ModTime().UnixNano())
		return true
	}
	if !stamp(t.bin) {
		return ""
	}
	fmt.Fprintf(h, "%s\x00%s\x00", t.run, t.dir)
	for _, f := range files {
		data, err := userfile.ReadFile(f, scenarios.MaxFileSize)
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s\x00%x\x00", f, sha256.Sum256(data))
	}
	return filepath.Join(dir, "converge", "lists", hex.EncodeToString(h.Sum(nil)[:16])+".json")
}

// listNow asks the binary.
func (t *tests) listNow(ctx context.Context, files []string) ([]scenariotest.Listed, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	// -converge.full: a campaign asks for its backends by name, so every
	// scenario is listed on every backend it names, whatever a plain go
	// test of the package would leave to the full matrix.
	inv := t.invocation()
	inv.List, inv.Full, inv.Files = true, true, files
	cmd := newChild(ctx, "the listing of the scenarios of "+t.bin, t.bin, "-test.run", t.run, "-test.count=1")
	cmd.Dir = t.dir
	cmd.Env = withInvocation(os.Environ(), inv)
	tail := &tailWriter{max: 20}
	cmd.Stderr = tail
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, &childError{bin: t.bin, err: err}
	}
	var listed []scenariotest.Listed
	var bad error
	br := bufio.NewReaderSize(out, maxLine)
	for {
		line, err := readLine(br)
		if rest, ok := strings.CutPrefix(line, scenariotest.ListPrefix); ok {
			var l scenariotest.Listed
			if jerr := json.Unmarshal([]byte(rest), &l); jerr != nil || l.Name == "" || l.Test == "" {
				bad = fmt.Errorf("%s listed a scenario converge cannot read: %q", t.bin, oneLine(rest, 200))
			} else {
				listed = append(listed, l)
			}
		} else if line != "" {
			_, _ = tail.Write([]byte(line + "\n"))
		}
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, &childError{bin: t.bin, err: err, output: tail.lines}
	}
	if bad != nil {
		return nil, bad
	}
	if len(listed) == 0 {
		return nil, usageError{fmt.Errorf("%s lists no scenarios under -test.run %s: is it a compiled test binary (go test -c) whose test calls scenariotest.Run? --test-run selects the tests", t.bin, t.run)}
	}
	byName := map[string]string{}
	for _, l := range listed {
		if other, dup := byName[l.Name]; dup {
			return nil, usageError{fmt.Errorf("scenario %q is run by both %s and %s: their results would overwrite each other; pick one with --test-run", l.Name, other, l.Test)}
		}
		byName[l.Name] = l.Test
	}
	return listed, nil
}

// pattern is -test.run for the named scenarios of one test: each
// level of the test's name, then the scenarios, anchored one by one as go
// test matches them.
func pattern(test string, names []string) string {
	var levels []string
	for _, p := range strings.Split(test, "/") {
		levels = append(levels, "^"+regexp.QuoteMeta(p)+"$")
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return strings.Join(levels, "/") + "/^(" + strings.Join(quoted, "|") + ")$"
}
