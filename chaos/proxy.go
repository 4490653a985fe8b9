package chaos

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy is a TLS reverse proxy on 127.0.0.1 in front of an API server: it
// forwards with the credentials of the config it was made from, applies an
// injector's faults on the way, and writes a kubeconfig that points at it,
// so a controller in another process (the scaler binary, or any controller
// binary) runs through the same faults as an in-process one.
//
// It asks the server for JSON (Accept), whatever the client prefers, so
// watch frames can be rewritten; client-go decodes by the answer's
// Content-Type. Anyone on the machine who can reach the port acts with the
// upstream credentials: it is a test fixture, not a security boundary.
type Proxy struct {
	server   *http.Server
	listener net.Listener
	caPEM    []byte
	done     chan error
}

// NewProxy starts a proxy to upstream with inj's faults (nil inj: none).
func NewProxy(upstream *rest.Config, inj *Injector) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("chaos proxy: upstream host %q: %v", upstream.Host, err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("chaos proxy: upstream transport: %w", err)
	}
	if inj != nil {
		transport = inj.Wrap(transport)
	}
	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("chaos proxy: listen: %w", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Set("Accept", "application/json")
			r.Out.Header.Del("Authorization") // the upstream transport authenticates
		},
		Transport:     transport,
		FlushInterval: -1, // watch streams flow frame by frame
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			// What a client sees of a refused or broken upstream connection.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, hjErr := hj.Hijack(); hjErr == nil {
					_ = conn.Close()
					return
				}
			}
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	p := &Proxy{server: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}, listener: l, caPEM: caPEM, done: make(chan error, 1)}
	go func() { p.done <- p.server.Serve(l) }()
	return p, nil
}

// URL is the proxy's address.
func (p *Proxy) URL() string { return "https://" + p.listener.Addr().String() }

// Kubeconfig is a kubeconfig that reaches the upstream through the proxy.
func (p *Proxy) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["converge"] = &clientcmdapi.Cluster{Server: p.URL(), CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["converge"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["converge"] = &clientcmdapi.Context{Cluster: "converge", AuthInfo: "converge"}
	cfg.CurrentContext = "converge"
	return clientcmd.Write(*cfg)
}

// WriteKubeconfig writes Kubeconfig to path.
func (p *Proxy) WriteKubeconfig(path string) error {
	data, err := p.Kubeconfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Close stops the proxy and cuts its connections.
func (p *Proxy) Close() error {
	err := p.server.Close()
	if serveErr := <-p.done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// Shutdown stops the proxy gracefully.
func (p *Proxy) Shutdown(ctx context.Context) error { return p.server.Shutdown(ctx) }

func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "converge chaos proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}
