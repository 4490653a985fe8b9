package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseFlagsRefusesBadNumbers: values the controller or client-go would
// misread are usage errors that name the flag and the value typed.
func TestParseFlagsRefusesBadNumbers(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		// client-go takes NaN, ±Inf and float32 overflow as "no rate limit",
		// and a float32 underflow as its default of 5.
		{"qps NaN", []string{"--kube-api-qps=NaN"}, []string{"--kube-api-qps", "NaN"}},
		{"qps lower-case nan", []string{"--kube-api-qps=nan"}, []string{"--kube-api-qps", "NaN"}},
		{"qps +Inf", []string{"--kube-api-qps=+Inf"}, []string{"--kube-api-qps", "+Inf"}},
		{"qps Inf", []string{"--kube-api-qps", "Inf"}, []string{"--kube-api-qps", "+Inf"}},
		{"qps -Inf", []string{"--kube-api-qps=-Inf"}, []string{"--kube-api-qps", "-Inf"}},
		{"qps overflows float32", []string{"--kube-api-qps=1e39"}, []string{"--kube-api-qps", "1e+39"}},
		{"qps underflows float32", []string{"--kube-api-qps=1e-50"}, []string{"--kube-api-qps", "1e-50"}},
		{"qps negative", []string{"--kube-api-qps=-1"}, []string{"--kube-api-qps", "-1"}},
		{"qps zero", []string{"--kube-api-qps=0"}, []string{"--kube-api-qps", "got 0"}},
		{"burst zero", []string{"--kube-api-burst=0"}, []string{"--kube-api-burst must be at least 1, got 0"}},

		// The controller reads 0 as "default"; the user must see the flag
		// and the 0 they typed, never the -1 it used to be mapped to.
		{"workers zero", []string{"--workers=0"}, []string{"--workers must be at least 1, got 0"}},
		{"workers negative", []string{"--workers=-2"}, []string{"--workers must be at least 1, got -2"}},
		{"cooldown zero", []string{"--cooldown=0"}, []string{"--cooldown must be longer than 0s, got 0s"}},
		{"cooldown negative", []string{"--cooldown=-1m"}, []string{"--cooldown must be longer than 0s, got -1m0s"}},
		{"max-retries zero", []string{"--max-retries=0"}, []string{"--max-retries must be at least 1, got 0"}},
		{"default-max-replicas zero", []string{"--default-max-replicas=0"}, []string{"--default-max-replicas must be between 1 and 2147483647, got 0"}},
		{"default-max-replicas above int32", []string{"--default-max-replicas=2147483648"}, []string{"--default-max-replicas", "2147483648"}},
		{"shutdown-grace zero", []string{"--shutdown-grace=0s"}, []string{"--shutdown-grace must be longer than 0s, got 0s"}},
		{"lease duration zero", []string{"--leader-elect", "--leader-elect-lease-duration=0"}, []string{"--leader-elect-lease-duration must be longer than 0s, got 0s"}},
		{"renew deadline zero", []string{"--leader-elect", "--leader-elect-renew-deadline=0"}, []string{"--leader-elect-renew-deadline must be longer than 0s, got 0s"}},
		{"retry period zero", []string{"--leader-elect", "--leader-elect-retry-period=0"}, []string{"--leader-elect-retry-period must be longer than 0s, got 0s"}},
		{"retry period negative without --leader-elect", []string{"--leader-elect-retry-period=-1s"}, []string{"--leader-elect-retry-period must be longer than 0s, got -1s"}},
		{
			"every mistake at once",
			[]string{"--kube-api-qps=NaN", "--workers=0", "--cooldown=0", "--max-retries=0", "--default-max-replicas=0", "--shutdown-grace=0", "--leader-elect-lease-duration=0", "--leader-elect-renew-deadline=0", "--leader-elect-retry-period=0"},
			[]string{"--kube-api-qps", "--workers", "--cooldown", "--max-retries", "--default-max-replicas", "--shutdown-grace", "--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			require.Error(t, err)
			assert.True(t, errors.As(err, new(*usageError)), "usage error: %v", err)
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
			if !strings.Contains(strings.Join(tt.args, " "), "-1") {
				assert.NotContains(t, err.Error(), "-1", "quotes only what was typed")
			}
		})
	}
}

func TestParseFlagsAcceptsEdgeValues(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"--kube-api-qps=0.5", "--kube-api-burst=1"},
		{"--kube-api-qps=3.4e38"},
		{"--kube-api-qps=1e-45"},
		{"--workers=1", "--max-retries=1", "--default-max-replicas=2147483647", "--cooldown=1ns", "--shutdown-grace=1ns"},
		{"--leader-elect", "--leader-elect-lease-duration=1m", "--leader-elect-renew-deadline=30s", "--leader-elect-retry-period=1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			o, err := parseFlags(args, io.Discard)
			require.NoError(t, err)
			require.NoError(t, saneOptions(o))
		})
	}
}

// FuzzParseFlags feeds parseFlags argument lists: the input split on NUL,
// so that an argument may hold spaces or be empty. parseFlags must not
// panic, must return only options the client and controller take as typed,
// and must explain every refusal.
func FuzzParseFlags(f *testing.F) {
	for _, seed := range []string{
		"",
		"--help",
		"--kube-api-qps=NaN",
		"--kube-api-qps=+Inf",
		"--kube-api-qps=-Inf",
		"--kube-api-qps=1e39",
		"--kube-api-qps=1e-50",
		"--workers=0",
		"--workers=-1",
		"--cooldown=0",
		"--default-max-replicas=2147483648",
		"--leader-elect\x00--leader-elect-lease-duration=0\x00--leader-elect-renew-deadline=-1s\x00--leader-elect-retry-period=0",
		"--kube-api-qps\x00NaN\x00--workers\x000",
		"--namespace=web\x00--workers=5\x00--leader-elect\x00--metrics-addr=:9090\x00--health-addr=0\x00-v\x004\x00--log-format=json",
		"-v=-1\x00--log-format=xml\x00--metrics-addr=8080",
		"--\x00--workers=0",
		"\x00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		if line != "" {
			args = strings.Split(line, "\x00")
		}
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseFlags(%q): empty error message", args)
			}
			if !errors.Is(err, pflag.ErrHelp) && !errors.As(err, new(*usageError)) {
				t.Fatalf("parseFlags(%q): %v is not a usage error", args, err)
			}
			return
		}
		if err := saneOptions(o); err != nil {
			t.Fatalf("parseFlags(%q) accepted %v", args, err)
		}
	})
}

// saneOptions returns an error naming an option that client-go or the
// controller would not take as given.
func saneOptions(o options) error {
	if q := float32(o.qps); math.IsNaN(o.qps) || q <= 0 || math.IsInf(float64(q), 0) {
		return fmt.Errorf("qps %v (float32 %v)", o.qps, q)
	}
	for name, v := range map[string]int{"burst": o.burst, "workers": o.workers, "max retries": o.maxRetries, "default max replicas": o.defaultMaxReplicas} {
		if v < 1 {
			return fmt.Errorf("%s %d", name, v)
		}
	}
	if o.defaultMaxReplicas > math.MaxInt32 {
		return fmt.Errorf("default max replicas %d overflows int32", o.defaultMaxReplicas)
	}
	for name, v := range map[string]time.Duration{
		"cooldown": o.cooldown, "shutdown grace": o.shutdownGrace,
		"lease duration": o.leaseDuration, "renew deadline": o.renewDeadline, "retry period": o.retryPeriod,
	} {
		if v <= 0 {
			return fmt.Errorf("%s %v", name, v)
		}
	}
	if o.verbosity < 0 {
		return fmt.Errorf("verbosity %d", o.verbosity)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("log format %q", o.logFormat)
	}
	for _, addr := range []string{o.metricsAddr, o.healthAddr} {
		if _, _, err := net.SplitHostPort(addr); addr != "0" && err != nil {
			return fmt.Errorf("address %q", addr)
		}
	}
	// What reaches the controller is what was typed: nothing is mapped to
	// -1, which the controller would report in its own words.
	o.leaderElect = true
	o.leaseNS = "default"
	cfg := o.controllerConfig(nil)
	le := cfg.LeaderElection
	if cfg.Workers != o.workers || cfg.Cooldown != o.cooldown || cfg.MaxRetries != o.maxRetries ||
		int(cfg.DefaultMaxReplicas) != o.defaultMaxReplicas || cfg.ShutdownGrace != o.shutdownGrace ||
		le.LeaseDuration != o.leaseDuration || le.RenewDeadline != o.renewDeadline || le.RetryPeriod != o.retryPeriod {
		return fmt.Errorf("controller config %+v differs from the flags %+v", cfg, o)
	}
	return nil
}
