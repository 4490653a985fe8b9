package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/converge-lab/converge/internal/invocation"
	"github.com/converge-lab/converge/reports"
)

func someRuns() []runKey {
	var all []runKey
	for _, s := range []string{"tombstone", "baseline", "partition"} {
		for _, b := range []string{"fake", "envtest"} {
			for seed := range uint64(7) {
				all = append(all, runKey{scenario: s, backend: b, seed: seed + 1, test: "TestScenarios"})
			}
		}
	}
	return all
}

// The shards of a run set cover it once, whatever order it was listed in,
// and each holds its share.
func TestShardsCoverTheRunsOnce(t *testing.T) {
	all := someRuns()
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	for n := 1; n <= 9; n++ {
		seen := map[string]int{}
		for i := range n {
			s := shard{i, n}
			got := s.pick(all)
			assert.Equal(t, got, s.pick(reversed), "shard %d/%d depends on the listing's order", i, n)
			assert.InDelta(t, len(all)/n, len(got), 1, "shard %d/%d", i, n)
			for _, k := range got {
				seen[k.String()]++
			}
		}
		assert.Len(t, seen, len(all), "%d shards", n)
		for k, c := range seen {
			assert.Equal(t, 1, c, "%s in %d shards of %d", k, c, n)
		}
	}
}

func TestParseShard(t *testing.T) {
	s, err := parseShard("3/4")
	require.NoError(t, err)
	assert.Equal(t, shard{3, 4}, s)
	s, err = parseShard("")
	require.NoError(t, err)
	assert.Equal(t, shard{0, 1}, s)
	for _, bad := range []string{"4/4", "-1/4", "1/0", "x/2", "1", "1/2/3", "/", "0/10001"} {
		_, err := parseShard(bad)
		assert.ErrorContains(t, err, "--shard", bad)
	}
}

// Runs of one seed share a process: on fake a slice of the seed's
// scenarios, small enough that every process slot has two; on envtest all
// of them. Every run is in exactly one.
func TestUnits(t *testing.T) {
	for parallel, want := range map[int][2]int{1: {7, 3}, 2: {7, 3}, 8: {14, 2}} {
		work := units(someRuns(), parallel)
		fake, heavy := 0, 0
		seen := map[string]bool{}
		for _, u := range work {
			for _, n := range u.names {
				k := runKey{scenario: n, backend: u.backend, seed: u.seed}.String()
				assert.False(t, seen[k], "%s twice", k)
				seen[k] = true
			}
			if u.heavy {
				heavy++
				assert.Equal(t, "envtest", u.backend)
				assert.Len(t, u.names, 3)
			} else {
				fake++
				assert.Equal(t, "fake", u.backend)
				assert.LessOrEqual(t, len(u.names), want[1], "parallel %d", parallel)
			}
		}
		assert.Len(t, seen, len(someRuns()))
		assert.Equal(t, want[0], fake, "parallel %d", parallel)
		assert.Equal(t, 7, heavy)
	}
}

// In a terminal the progress line is rewritten in place; in a log it is a
// plain line at each tenth of the runs.
func TestProgress(t *testing.T) {
	var log bytes.Buffer
	tr := newTracker(&log, 40)
	for i := range 40 {
		verdict := "PASS"
		if i%8 == 0 {
			verdict = "FAIL"
		}
		tr.ran(verdict, fmt.Sprintf("s/fake/seed-%d", i+1), "0.10s")
	}
	tr.finish()
	assert.Equal(t, 10, strings.Count(log.String(), "progress: "), log.String())
	assert.Contains(t, log.String(), "progress: 4 of 40 runs done, 1 failed")
	assert.Contains(t, log.String(), "left")
	assert.Contains(t, log.String(), "progress: 40 of 40 runs done, 5 failed")
	assert.NotContains(t, log.String(), "\r")

	var screen bytes.Buffer
	tr = newTracker(&screen, 3)
	tr.tty = true
	tr.ran("PASS", "s/fake/seed-1", "0.10s")
	tr.ran("FAIL", "s/fake/seed-2", "0.10s")
	tr.finish()
	assert.True(t, strings.HasPrefix(screen.String(), "1/3  PASS  s/fake/seed-1  0.10s\nprogress: 1 of 3 runs done, 0 failed, "), "%q", screen.String())
	assert.Contains(t, screen.String(), "\r\033[K2/3  FAIL  s/fake/seed-2")
	assert.True(t, strings.HasSuffix(screen.String(), "\r\033[K"), "the line is taken off at the end: %q", screen.String())
}

// A campaign in shards: each shard runs its slice in processes side by
// side, merge joins them into one report, and refuses a shard given twice.
func TestCampaignInShards(t *testing.T) {
	dir := t.TempDir()
	bin := scenarioTests(t)
	var shards []string
	for i := range 3 {
		report := filepath.Join(dir, "shard-"+strconv.Itoa(i))
		out, err := run(t, "run", "baseline", "partition", "--seeds", "1-2", "--shard", fmt.Sprintf("%d/3", i), "--parallel", "2", "--report", report, "--test-binary", bin)
		require.NoError(t, err, out)
		assert.Regexp(t, `(?m)^\s*1/\d  PASS  `, out)
		shards = append(shards, report)
	}
	out, err := run(t, "run", "baseline", "--shard", "3/7", "--test-binary", bin)
	require.NoError(t, err, out)
	assert.Contains(t, out, "shard 3/7 has no runs: the invocation asks for 1 in all")

	all := filepath.Join(dir, "all")
	junit := filepath.Join(all, "junit.xml")
	out, err = run(t, append(append([]string{"merge"}, shards...), "--report", all, "--junit", junit)...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "4 results from 3 folders")
	assert.Contains(t, out, "4 runs, 0 failed")
	for _, name := range []string{"baseline_fake_1.json", "baseline_fake_2.json", "partition_fake_1.json", "partition_fake_2.json", "index.html"} {
		assert.FileExists(t, filepath.Join(all, name))
	}
	data, err := os.ReadFile(junit)
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(string(data), "<testcase"))

	_, err = run(t, "merge", shards[0], shards[0], "--report", filepath.Join(dir, "twice"))
	assert.ErrorContains(t, err, "is in both")
	assert.Equal(t, 2, exitCode(err))
	_, err = run(t, "merge", shards[0])
	assert.ErrorContains(t, err, "merge needs --report")
	_, err = run(t, "merge", filepath.Join(dir, "gone"), "--report", filepath.Join(dir, "x"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = run(t, "merge", t.TempDir(), "--report", filepath.Join(dir, "x"))
	assert.ErrorContains(t, err, "no results in")
	for _, bad := range [][]string{{"--shard", "2/2"}, {"--parallel", "0"}} {
		_, err := run(t, append([]string{"run", "baseline", "--test-binary", bin}, bad...)...)
		assert.Equal(t, 2, exitCode(err), "%v: %v", bad, err)
	}
}

// A run whose process dies takes no other run's result with it: the runs
// its process owed run again, each alone.
func TestADyingRunLosesNoOther(t *testing.T) {
	dir := t.TempDir()
	// It lists dies and lives-1 to lives-4; a process whose -test.run
	// names dies dies before any result, any other passes each run it is
	// given.
	bin := writeFile(t, filepath.Join(dir, "half.test"), `#!/bin/sh
report= id= pattern=
for a in "$@" $CONVERGE_FLAGS; do
	case "$a" in
	-converge.list=true)
		for n in dies lives-1 lives-2 lives-3 lives-4; do
			echo "converge-scenario: {\"test\":\"TestScenarios\",\"name\":\"$n\",\"backends\":[\"fake\"]}"
		done
		exit 0 ;;
	-converge.report=*) report="${a#-converge.report=}" ;;
	-converge.run-id=*) id="${a#-converge.run-id=}" ;;
	*TestScenarios*) pattern="$a" ;;
	esac
done
case "$pattern" in
*dies*)
	echo 'fatal error: concurrent map writes' >&2
	exit 2 ;;
esac
for n in lives-1 lives-2 lives-3 lives-4; do
	case "$pattern" in
	*$n*)
		printf '{"schema":"`+reports.SchemaVersion+`","scenario":"%s","backend":"fake","seed":1,"pass":true,"runID":"%s"}' "$n" "$id" > "$report/${n}_fake_1.json"
		echo "--- PASS: TestScenarios/$n/fake/seed-1 (0.01s)" ;;
	esac
done
`)
	require.NoError(t, os.Chmod(bin, 0o755))
	// One process slot: three runs to a process, dies with two others.
	out, err := run(t, "run", "--parallel", "1", "--report", filepath.Join(dir, "r"), "--test-binary", bin)
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "fatal error: concurrent map writes")
	assert.Contains(t, out, "NO RESULT dies/fake/seed-1")
	for i := 1; i <= 4; i++ {
		assert.Contains(t, out, fmt.Sprintf("PASS  lives-%d/fake/seed-1", i))
	}
	assert.Contains(t, out, "5 runs, 0 failed, 0 with a fault or check that never fired, 1 without a result, 0 skipped")
}

// campaignManifests decodes config/campaign/job.yaml, strictly.
func campaignManifests(t *testing.T) (*corev1.PersistentVolumeClaim, *batchv1.Job) {
	t.Helper()
	data, err := os.ReadFile("../../config/campaign/job.yaml")
	require.NoError(t, err)
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var pvc *corev1.PersistentVolumeClaim
	var job *batchv1.Job
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			pvc = o
		case *batchv1.Job:
			job = o
		default:
			t.Fatalf("unexpected %T", obj)
		}
	}
	require.NotNil(t, pvc)
	require.NotNil(t, job)
	return pvc, job
}

// config/campaign/job.yaml: an Indexed Job whose pod i runs shard i of as
// many as it has completions, each into a folder of its own, with flags
// converge takes. (TestRunOnACluster has a real API server accept it.)
func TestCampaignJob(t *testing.T) {
	pvc, job := campaignManifests(t)
	spec := job.Spec
	require.NotNil(t, spec.CompletionMode)
	assert.Equal(t, batchv1.IndexedCompletion, *spec.CompletionMode)
	n := int(*spec.Completions)
	assert.Equal(t, n, int(*spec.Parallelism))
	assert.Equal(t, corev1.RestartPolicyNever, spec.Template.Spec.RestartPolicy)
	c := spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"/converge"}, c.Command)
	require.Equal(t, "run", c.Args[0])
	// A failed verdict (exit 1) fails its index without a retry.
	require.NotNil(t, spec.PodFailurePolicy)
	rule := spec.PodFailurePolicy.Rules[0]
	assert.Equal(t, batchv1.PodFailurePolicyActionFailIndex, rule.Action)
	assert.Equal(t, []int32{1}, rule.OnExitCodes.Values)
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = m.MountPath
	}
	var claim string
	for _, v := range spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
			assert.NotEmpty(t, mounted[v.Name])
		}
	}
	assert.Equal(t, pvc.Name, claim)

	// Each pod's arguments, as the kubelet expands them, are flags run
	// takes, and the pods' shards and folders are distinct.
	reportsSeen := map[string]bool{}
	for i := range n {
		var args []string
		for _, a := range c.Args[1:] {
			args = append(args, strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)))
		}
		cmd := runCommand(context.Background(), &bytes.Buffer{}, &bytes.Buffer{})
		require.NoError(t, cmd.ParseFlags(args), "pod %d", i)
		get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
		s, err := parseShard(get("shard"))
		require.NoError(t, err)
		assert.Equal(t, shard{i, n}, s)
		seeds, err := seedList(get("seeds"))
		require.NoError(t, err)
		assert.NotEmpty(t, seeds)
		report := get("report")
		assert.True(t, strings.HasPrefix(report, mounted["results"]+"/"), report)
		assert.True(t, strings.HasPrefix(get("junit"), report+"/"), "JUnit inside the shard's own folder")
		assert.False(t, reportsSeen[report], "two pods write %s", report)
		reportsSeen[report] = true
	}

}

// createCampaign has the API server check config/campaign/job.yaml,
// creating it with a dry run.
func createCampaign(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	pvc, job := campaignManifests(t)
	ctx := t.Context()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: job.Namespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err = client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, dry)
	require.NoError(t, err)
	_, err = client.BatchV1().Jobs(job.Namespace).Create(ctx, job, dry)
	require.NoError(t, err, "config/campaign/job.yaml")
}

// The processes that run scenarios collect garbage less often, within a
// share of the machine's memory, unless the caller says otherwise.
func TestChildEnv(t *testing.T) {
	env := childEnv([]string{"HOME=/h"}, 2)
	assert.Contains(t, env, "GOGC=400")
	if memAvailable("/") > 0 {
		i := slices.IndexFunc(env, func(e string) bool { return strings.HasPrefix(e, "GOMEMLIMIT=") })
		require.GreaterOrEqual(t, i, 0, "%v", env)
		mib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(env[i], "GOMEMLIMIT="), "MiB"), 10, 64)
		require.NoError(t, err, env[i])
		total := memAvailable("/")
		assert.Equal(t, max(total/8, min(1<<30, total/3))>>20, mib, "a quarter shared by two, at least 1 GiB where three have it")
	}
	own := childEnv([]string{"GOGC=50", "GOMEMLIMIT=100MiB"}, 2)
	assert.Equal(t, []string{"GOGC=50", "GOMEMLIMIT=100MiB"}, own)
}

// Processes side by side write the log a whole line at a time, stdout and
// stderr of one process each on its own writer.
func TestSharedLogKeepsLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	log := &sharedLog{w: &buf}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			l := log.lines()
			defer l.flush()
			line := strings.Repeat(strconv.Itoa(w), 50) + "\n"
			for range 200 {
				// A line in three writes.
				_, _ = l.Write([]byte(line[:10]))
				_, _ = l.Write([]byte(line[10:30]))
				_, _ = l.Write([]byte(line[30:]))
			}
			_, _ = l.Write([]byte("tail without newline"))
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	assert.Len(t, lines, 8*201)
	for _, l := range lines {
		if l == "tail without newline" {
			continue
		}
		require.Len(t, l, 50)
		assert.Equal(t, strings.Repeat(l[:1], 50), l)
	}
}

// An exploration's and a shrinking's processes get childEnv's collector
// too: runTests starts them with it, and the caller's GOGC wins.
func TestRunTestsCollectsLess(t *testing.T) {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} { // the caller's own are kept: none here
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tests.sh")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho \"GOGC=$GOGC GOMEMLIMIT=$GOMEMLIMIT\" > \"$0.env\"\n"), 0o755))
	tt := &tests{bin: bin, dir: dir}
	read := func() string {
		b, err := os.ReadFile(bin + ".env")
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	require.NoError(t, runTests(t.Context(), "a test", tt, nil, invocation.Invocation{}, nil, 3, dir, io.Discard))
	got := read()
	assert.Contains(t, got, "GOGC=400 ")
	if memAvailable("/") > 0 {
		assert.Regexp(t, `GOMEMLIMIT=[0-9]+MiB$`, got)
	}
	t.Setenv("GOGC", "75")
	require.NoError(t, runTests(t.Context(), "a test", tt, nil, invocation.Invocation{}, nil, 3, dir, io.Discard))
	assert.Contains(t, read(), "GOGC=75 ")
}
