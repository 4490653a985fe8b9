package envtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// EtcdURL is etcd's client URL. CompactEtcd compacts etcd's history up to
// its current revision, through etcd's JSON gateway, and returns that
// revision: requests for an older resourceVersion that reach etcd then fail;
// the API server's watch cache still answers recent ones itself.
func (cp *ControlPlane) EtcdURL() string { return cp.env.ControlPlane.Etcd.URL.String() }

// CompactEtcd compacts etcd up to its current revision; see above.
func (cp *ControlPlane) CompactEtcd(ctx context.Context) (int64, error) {
	base := cp.env.ControlPlane.Etcd.URL
	if base == nil {
		return 0, fmt.Errorf("envtest: etcd URL unknown")
	}
	return CompactEtcdAt(ctx, base.String())
}

// CompactEtcdAt compacts the etcd whose client URL is url up to its current
// revision, through etcd's JSON gateway, and returns that revision.
func CompactEtcdAt(ctx context.Context, url string) (int64, error) {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	key := base64.StdEncoding.EncodeToString([]byte("/converge/compaction-probe"))
	if err := etcdCall(ctx, url+"/v3/kv/range", map[string]any{"key": key}, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", rng.Header.Revision, err)
	}
	// "Already compacted" means nothing was written since the last
	// compaction: the history is as short as it can be.
	err = etcdCall(ctx, url+"/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, nil)
	if err != nil && !strings.Contains(err.Error(), "required revision has been compacted") {
		return 0, err
	}
	return rev, nil
}

// Compact is CompactEtcd for the chaos package's Compaction fault, on a
// ready plane (WaitReady).
func (cp *ControlPlane) Compact(ctx context.Context) error {
	if err := cp.WaitReady(ctx); err != nil {
		return err
	}
	_, err := cp.CompactEtcd(ctx)
	return err
}

func etcdCall(ctx context.Context, url string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("envtest: etcd %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("envtest: etcd %s: %s: %s", url, resp.Status, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}
