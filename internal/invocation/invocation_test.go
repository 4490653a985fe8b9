package invocation_test

import (
	"flag"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/invocation"
)

// every is an invocation with each setting away from its default.
func every() invocation.Invocation {
	return invocation.Invocation{
		Seeds: 3, Seed: 7, Backends: []string{"envtest"}, Full: true, Report: "/tmp/a b/report", RunTimeout: time.Minute,
		RunID: "it's", Kubeconfig: "/k", Kwok: "start", List: true, Files: []string{"/x,y.yaml", "/z.yaml"},
		Explore: "e", ExplorePlan: "/p.json", ExploreWithoutFaults: true, ExploreShard: "1/2", ExploreClaims: "/claims", Shrink: "/r.json",
	}
}

// What Args writes, Parse reads back; the default writes which runs there
// are and nothing else.
func TestArgsParseBack(t *testing.T) {
	for _, want := range []invocation.Invocation{invocation.Default(), every()} {
		got, err := invocation.Parse(want.Args())
		require.NoError(t, err, want.Args())
		assert.Equal(t, want, got)
	}
	assert.Equal(t, []string{"-converge.seeds=1", "-converge.seed=1", "-converge.backends=fake,envtest"}, invocation.Default().Args())
}

// $CONVERGE_FLAGS carries an invocation, quotes and all, and the flags set
// on the command line win over it.
func TestReadFromTheEnvironmentAndFlags(t *testing.T) {
	t.Setenv(invocation.Env, every().EnvValue())
	got, err := invocation.Read(nil)
	require.NoError(t, err)
	assert.Equal(t, every(), got)

	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	invocation.Register(fs)
	require.True(t, invocation.Registered(fs))
	require.NoError(t, fs.Parse([]string{"-converge.seeds=5", "-converge.file=/w.yaml"}))
	got, err = invocation.Read(fs)
	require.NoError(t, err)
	want := every()
	want.Seeds, want.Files = 5, append(want.Files, "/w.yaml")
	assert.Equal(t, want, got)
}

// Bad input is an error that names what is wrong.
func TestBadInvocations(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-converge.seeds=0"}, "seeds must fit"},
		{[]string{"-converge.seed=18446744073709551615", "-converge.seeds=2"}, "seeds must fit"},
		{[]string{"-converge.backends=fak"}, `unknown backend "fak"`},
		{[]string{"-converge.run-timeout=-1s"}, "must be positive"},
		{[]string{"-converge.nope=1"}, "not defined"},
		{[]string{"-converge.seeds=x"}, "invalid value"},
		{[]string{"stray"}, `"stray"`},
	} {
		_, err := invocation.Parse(c.args)
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.says, c.args)
	}
	t.Setenv(invocation.Env, `-converge.report='unclosed`)
	_, err := invocation.Read(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), invocation.Env)
}

// A command gives the invocation as flags where the binary registers them,
// else in the environment.
func TestCommand(t *testing.T) {
	i := invocation.Default()
	i.Seed, i.Backends, i.Report = 4, []string{"fake"}, "/a b"
	assert.Equal(t, "go test ./x -converge.seeds=1 -converge.seed=4 -converge.backends=fake '-converge.report=/a b'", i.Command(true, "go test ./x"))
	// The shell hands the test binary what Read parses back.
	out, err := exec.Command("sh", "-c", i.Command(false, `sh -c 'printf %s "$`+invocation.Env+`"'`)).Output()
	require.NoError(t, err)
	t.Setenv(invocation.Env, string(out))
	got, err := invocation.Read(nil)
	require.NoError(t, err)
	assert.Equal(t, i, got)
}
