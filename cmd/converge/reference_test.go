package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/internal/golden"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite the generated page docs/reference/cli.md")

// The CLI reference is the command tree's: a command or flag added,
// renamed or described anew without the page following fails here (go
// test ./cmd/converge -run TestReferenceDescribesTheCLI -update rewrites
// it).
func TestReferenceDescribesTheCLI(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "reference", "cli.md")
	want := cliReference(rootCommand(context.Background(), io.Discard, io.Discard))
	golden.Check(t, path, want, *update, "go test ./cmd/converge -run TestReferenceDescribesTheCLI -update")
}

// machineDefaults are the flag defaults that depend on the machine the
// page is made on, by flag name, with what the page says instead.
var machineDefaults = map[string]string{"parallel": "the number of CPUs"}

// cliReference generates docs/reference/cli.md: the root's description
// and a section per command, in the order help lists them.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Command-line reference\n\n"+
		"<!-- Generated from the command tree of cmd/converge by TestReferenceDescribesTheCLI "+
		"(go test ./cmd/converge -run TestReferenceDescribesTheCLI -update). Do not edit. -->\n\n"+
		"`%s`: %s.\n\n%s"+
		"Every command also takes `-h`, `--help`. A command exits with status 1 when a run failed or the command "+
		"could not do its work, 2 on a usage error (`converge kwok -- COMMAND` exits with the command's status).\n\n"+
		"| command | what it does |\n| --- | --- |\n", root.Name(), root.Short, paragraph(root.Long))
	for _, c := range root.Commands() {
		fmt.Fprintf(&b, "| [%s](#%s) | %s |\n", c.CommandPath(), strings.ReplaceAll(c.CommandPath(), " ", "-"), strings.ReplaceAll(c.Short, "|", `\|`))
	}
	b.WriteString("\n")
	for _, c := range root.Commands() {
		command(&b, c)
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// command writes c's section: its usage line, its description, its
// examples and its flags.
func command(b *strings.Builder, c *cobra.Command) {
	fmt.Fprintf(b, "## %s\n\n```\n%s\n```\n\n", c.CommandPath(), c.UseLine())
	if c.Long != "" {
		b.WriteString(paragraph(c.Long))
	} else {
		b.WriteString(paragraph(c.Short + "."))
	}
	if c.Example != "" {
		fmt.Fprintf(b, "Examples:\n\n```\n%s\n```\n\n", strings.TrimSpace(c.Example))
	}
	var rows []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		if typ, _ := pflag.UnquoteUsage(f); typ != "" {
			name += " " + typ
		}
		def := "`" + f.DefValue + "`"
		switch {
		case machineDefaults[f.Name] != "":
			def = machineDefaults[f.Name]
		case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "[]" || f.DefValue == "0" || f.DefValue == "0s":
			def = ""
		}
		_, usage := pflag.UnquoteUsage(f)
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", name, def, strings.ReplaceAll(usage, "|", `\|`)))
	})
	if len(rows) > 0 {
		fmt.Fprintf(b, "| flag | default | what it does |\n| --- | --- | --- |\n%s\n\n", strings.Join(rows, "\n"))
	}
	for _, sub := range c.Commands() {
		command(b, sub)
	}
}

// paragraph is text as Markdown paragraphs: its lines joined, blank lines
// kept between paragraphs.
func paragraph(text string) string {
	var out []string
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, p+"\n\n")
		}
	}
	return strings.Join(out, "")
}

// TestKubebuilderGuideQuotesTheCLI: each converge command the kubebuilder
// guide quotes names a command and flags the CLI has.
func TestKubebuilderGuideQuotesTheCLI(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubebuilder.md"))
	require.NoError(t, err)
	quoted := 0
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock || !strings.HasPrefix(line, "converge ") {
			continue
		}
		quoted++
		args := strings.Fields(line)[1:]
		root := rootCommand(context.Background(), io.Discard, io.Discard)
		c, rest, err := root.Find(args)
		require.NoError(t, err, line)
		require.NotEqual(t, root, c, "%s: no such command", line)
		require.NoError(t, c.ParseFlags(rest), line)
		require.NoError(t, c.ValidateArgs(c.Flags().Args()), line)
	}
	assert.Equal(t, 2, quoted, "the commands the guide quotes")
}
