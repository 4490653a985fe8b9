package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/converge-lab/converge/controller"
)

// options are the scaler's flags.
type options struct {
	kubeconfig string
	qps        float64
	burst      int

	namespace          string
	workers            int
	cooldown           time.Duration
	maxRetries         int
	defaultMaxReplicas int
	shutdownGrace      time.Duration

	metricsAddr string
	healthAddr  string

	leaderElect   bool
	leaseNS       string
	leaseName     string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration

	logFormat string
	verbosity int
}

// usageError is a bad command line: the process exits with status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func newFlagSet(o *options, output io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("scaler", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(output)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; when empty: $KUBECONFIG, then the in-cluster config, then ~/.kube/config")
	fs.Float64Var(&o.qps, "kube-api-qps", 20, "steady queries per second to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", 30, "burst of queries to the API server above --kube-api-qps")

	fs.StringVar(&o.namespace, "namespace", "", "manage Deployments of this namespace only; empty means all namespaces")
	fs.IntVar(&o.workers, "workers", controller.DefaultWorkers, "reconcile workers")
	fs.DurationVar(&o.cooldown, "cooldown", controller.DefaultCooldown, "least time between two scale-ups of one Deployment")
	fs.IntVar(&o.maxRetries, "max-retries", controller.DefaultMaxRetries, "retries with backoff of a failing Deployment before it is tried only once per cooldown")
	fs.IntVar(&o.defaultMaxReplicas, "default-max-replicas", int(controller.DefaultMaxReplicas), "ceiling of a Deployment without the "+controller.AnnotationMaxReplicas+" annotation")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", controller.DefaultShutdownGrace, "how long in-flight reconciles may take to finish after SIGTERM")

	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "address of the Prometheus /metrics endpoint; \"0\" disables it")
	fs.StringVar(&o.healthAddr, "health-addr", ":8081", "address of the /healthz and /readyz probes; \"0\" disables them")

	fs.BoolVar(&o.leaderElect, "leader-elect", false, "act only while holding a coordination.k8s.io Lease, so replicas can stand by")
	fs.StringVar(&o.leaseNS, "leader-elect-namespace", "", "namespace of the Lease; empty means $POD_NAMESPACE, else \"default\"")
	fs.StringVar(&o.leaseName, "leader-elect-name", controller.DefaultLeaseName, "name of the Lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", controller.DefaultLeaseDuration, "how long standbys wait before taking over a Lease that is not renewed")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", controller.DefaultRenewDeadline, "how long the leader retries renewing before it gives up leading and exits")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", controller.DefaultRetryPeriod, "wait between attempts to acquire or renew the Lease")

	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity: 2 shows retries and leader changes, 4 every decision")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: scaler [flags]\n\n"+
			"Doubles spec.replicas of Deployments labelled %s=%s when fewer than half\n"+
			"of their pods are ready, up to the %s annotation (default %d).\n"+
			"The identity used in leader election is $POD_NAME, else the hostname and a random suffix.\n\nFlags:\n",
			controller.LabelEnabled, controller.ValueEnabled, controller.AnnotationMaxReplicas, controller.DefaultMaxReplicas)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := newFlagSet(&o, output)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, err
		}
		return o, &usageError{err}
	}
	if fs.NArg() > 0 {
		return o, &usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	var errs []error
	if o.logFormat != "text" && o.logFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, got %q", o.logFormat))
	}
	// The client takes float32(qps); NaN, an infinity or a value that
	// overflows float32 would turn rate limiting off, and one that
	// underflows to 0 would silently mean client-go's default.
	if q := float32(o.qps); math.IsNaN(o.qps) || q <= 0 || math.IsInf(float64(q), 0) {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be a number between 1e-45 and 3.4e+38, got %v", o.qps))
	}
	// The defaults of these flags are not zero, so a zero here was typed.
	// Refuse it by name: the controller's Config would read it as "use the
	// default".
	atLeastOne(&errs, "kube-api-burst", o.burst)
	atLeastOne(&errs, "workers", o.workers)
	atLeastOne(&errs, "cooldown", o.cooldown)
	atLeastOne(&errs, "max-retries", o.maxRetries)
	if o.defaultMaxReplicas < 1 || o.defaultMaxReplicas > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("--default-max-replicas must be between 1 and %d, got %d", math.MaxInt32, o.defaultMaxReplicas))
	}
	atLeastOne(&errs, "shutdown-grace", o.shutdownGrace)
	// Checked with or without --leader-elect: a bad value is a mistake
	// either way, and would otherwise surface only once it is turned on.
	atLeastOne(&errs, "leader-elect-lease-duration", o.leaseDuration)
	atLeastOne(&errs, "leader-elect-renew-deadline", o.renewDeadline)
	atLeastOne(&errs, "leader-elect-retry-period", o.retryPeriod)
	if o.verbosity < 0 {
		errs = append(errs, fmt.Errorf("-v must not be negative, got %d", o.verbosity))
	}
	for _, a := range []struct{ name, addr string }{{"metrics-addr", o.metricsAddr}, {"health-addr", o.healthAddr}} {
		if a.addr == "0" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", a.name, a.addr, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return o, &usageError{err}
	}
	return o, nil
}

// atLeastOne adds an error naming flag when v is zero or negative.
func atLeastOne[T int | time.Duration](errs *[]error, flag string, v T) {
	if v > 0 {
		return
	}
	want := "at least 1"
	if _, ok := any(v).(time.Duration); ok {
		want = "longer than 0s"
	}
	*errs = append(*errs, fmt.Errorf("--%s must be %s, got %v", flag, want, v))
}

// controllerConfig maps the flags to the controller's Config; the controller
// validates it, including how the lease timings relate to each other.
func (o options) controllerConfig(reg prometheus.Registerer) controller.Config {
	cfg := controller.Config{
		Namespace:          o.namespace,
		Workers:            zeroIsInvalid(o.workers),
		Cooldown:           zeroIsInvalid(o.cooldown),
		MaxRetries:         zeroIsInvalid(o.maxRetries),
		DefaultMaxReplicas: int32(zeroIsInvalid(o.defaultMaxReplicas)),
		ShutdownGrace:      zeroIsInvalid(o.shutdownGrace),
		Registerer:         reg,
	}
	if o.leaderElect {
		cfg.LeaderElection = &controller.LeaderElectionConfig{
			Namespace:     firstNonEmpty(o.leaseNS, os.Getenv("POD_NAMESPACE"), "default"),
			Name:          o.leaseName,
			Identity:      identity(),
			LeaseDuration: zeroIsInvalid(o.leaseDuration),
			RenewDeadline: zeroIsInvalid(o.renewDeadline),
			RetryPeriod:   zeroIsInvalid(o.retryPeriod),
		}
	}
	return cfg
}

// zeroIsInvalid maps 0 to -1 so that the Config, which reads zero as
// "default", refuses it. parseFlags already refuses zeros with the flag's
// name; this only keeps options built some other way from silently getting
// the defaults.
func zeroIsInvalid[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

func identity() string {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "scaler"
	}
	return host + "_" + utilrand.String(6)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// run is the whole program: flags, logging, client, servers, controller.
// Everything that can be checked without the network is checked first.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx = setupLogging(ctx, o, stderr)
	cfg, err := loadConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "converge-scaler"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the client: %w", err)
	}
	reg := newRegistry()
	ctl, err := controller.New(o.controllerConfig(reg), client)
	if err != nil {
		return err
	}
	if err := checkReachable(ctx, client, cfg.Host); err != nil {
		return err
	}
	return serve(ctx, o, ctl, reg, nil)
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serve runs the controller with its metrics and probe servers until ctx
// ends and the controller has shut down. listening, when set, is told the
// address each server listens on.
func serve(ctx context.Context, o options, ctl *controller.Controller, reg *prometheus.Registry, listening func(name, addr string)) error {
	logger := klog.FromContext(ctx)
	var servers []*http.Server
	defer func() {
		for _, s := range servers {
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = s.Shutdown(shutdownCtx)
			cancel()
		}
	}()
	for _, s := range []struct {
		name, addr string
		handler    http.Handler
	}{
		{"metrics", o.metricsAddr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})},
		{"health", o.healthAddr, ctl.HealthHandler()},
	} {
		if s.addr == "0" {
			continue
		}
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("%s server: %w", s.name, err)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		logger.Info("Serving", "server", s.name, "addr", l.Addr().String())
		if listening != nil {
			listening(s.name, l.Addr().String())
		}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Server stopped", "server", s.name)
			}
		}()
	}
	if err := ctl.Run(ctx); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	logger.Info("Stopped")
	return nil
}

// loadConfig: --kubeconfig, then $KUBECONFIG, then in-cluster, then
// ~/.kube/config.
func loadConfig(path string) (*rest.Config, error) {
	if path == "" && os.Getenv("KUBECONFIG") == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// checkReachable fails fast, with the server's address, when the API server
// cannot be reached: otherwise the informers would retry silently forever.
func checkReachable(ctx context.Context, client kubernetes.Interface, host string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return fmt.Errorf("cannot reach the API server at %s: %w", host, err)
	}
	klog.FromContext(ctx).V(2).Info("API server reachable", "host", host, "version", strconv.Quote(string(body)))
	return nil
}

// setupLogging routes klog, and so client-go's logs, to text or JSON on
// stderr at the chosen verbosity, and puts the logger in the context.
func setupLogging(ctx context.Context, o options, stderr io.Writer) context.Context {
	var logger logr.Logger
	if o.logFormat == "json" {
		logger = logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-o.verbosity)}))
	} else {
		logger = textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(stderr), textlogger.Verbosity(o.verbosity)))
	}
	klog.SetLogger(logger)
	return klog.NewContext(ctx, logger)
}
