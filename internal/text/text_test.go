package text

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFirstLine(t *testing.T) {
	assert.Equal(t, "a", FirstLine("a\nb\nc"))
	assert.Equal(t, "abc", FirstLine("abc"))
	assert.Equal(t, "", FirstLine("\nb"))
}

// A quoted word reaches a shell's command as it was.
func TestShellQuote(t *testing.T) {
	assert.Equal(t, "plain-word_1.2/x=y:z,+@", ShellQuote("plain-word_1.2/x=y:z,+@"))
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"", "two words", "it's", `$HOME`, "a\nb", "`x`", `"q"`, `\`} {
		out, err := exec.Command(sh, "-c", "printf %s "+ShellQuote(s)).Output()
		require.NoError(t, err, s)
		assert.Equal(t, s, string(out))
	}
}

func TestIndent(t *testing.T) {
	assert.Equal(t, "  a\n  b", Indent("a\nb\n\n", "  "))
	assert.Equal(t, "  (empty)", Indent("\n", "  "))
}
