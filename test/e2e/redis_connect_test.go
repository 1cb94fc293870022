package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestRedisTLS: two replicas in the redis mode reach Redis over TLS,
// checking its certificate against the CA given in --redis-tls-ca-file; a
// change is processed by one of them and rolls its users once. A replica
// that speaks plain text to the TLS port is not ready.
func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeTLS(t, dir)
	r := startRedisWith(t, nil, "--port", "0", "--tls-port", "{port}", "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	tls := []string{"--redis-tls", "--redis-tls-ca-file=" + ca}
	ns := namespace(t)
	f := newFleet(t, ns, 1, 3, 0)
	a := startWatcher(t, "a", ns, append(r.Args(), tls...)...)
	b := startWatcher(t, "b", ns, append(r.Args(), tls...)...)
	plain := startWatcher(t, "plain", ns, r.Args()...)
	waitBackendUp(t, a)
	waitBackendUp(t, b)
	waitNotReady(t, plain)
	plain.Stop()
	f.waitAdopted(t)

	c := f.change(t, 0, "1")
	f.waitCounts(t, 1, 2*time.Second)
	NewWithT(t).Expect(len(c.loggedBy(a))+len(c.loggedBy(b))).To(Equal(1), "the change is processed by one replica")
	NewWithT(t).Expect(metricValue(t, a, acquisitions("acquired")) + metricValue(t, b, acquisitions("acquired"))).To(Equal(1.0))
}

// TestRedisSentinel: replicas find the Redis master through Sentinel, and
// their locks are taken on it.
func TestRedisSentinel(t *testing.T) {
	master := startRedis(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf") // Sentinel rewrites it
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("sentinel monitor mymaster 127.0.0.1 %d 1\n", master.Port)), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := startRedisWith(t, []string{conf}, "--sentinel")
	args := []string{"--lock=redis", "--redis-sentinel-master=mymaster", "--redis-sentinel-addrs=" + sentinel.Addr(), "--redis-socket-timeout=1"}
	ns := namespace(t)
	f := newFleet(t, ns, 1, 2, 0)
	a, b := startWatcher(t, "a", ns, args...), startWatcher(t, "b", ns, args...)
	waitBackendUp(t, a)
	waitBackendUp(t, b)
	f.waitAdopted(t)

	c := f.change(t, 0, "1")
	f.waitCounts(t, 1, 2*time.Second)
	NewWithT(t).Expect(len(c.loggedBy(a))+len(c.loggedBy(b))).To(Equal(1), "the change is processed by one replica")
	// The processed change is marked done on the master, under the keys of
	// this installation: "watcher:<namespace>/<lease>/<hash key ID>:done:"
	// and the change, "ConfigMap/ns/name[/uid]@version".
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(master.Port), "--scan", "--pattern", "watcher:*:done:*").Output()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	// c.id is "ConfigMap/ns/name/uid@version"; keys are prefixed by the
	// installation: its namespace, Lease and hash key ID.
	done := `^watcher:` + regexp.QuoteMeta(ns) + `/watcher/[0-9a-f]+:done:` + regexp.QuoteMeta(c.id) + `$`
	NewWithT(t).Expect(strings.Fields(string(out))).To(ContainElement(MatchRegexp(done)))
}

// writeTLS writes a CA and a server certificate for 127.0.0.1 signed by it,
// and returns the paths of the CA, the certificate and its key.
func writeTLS(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "watcher test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("redis.pem", "CERTIFICATE", srvDER), write("redis-key.pem", "EC PRIVATE KEY", keyDER)
}
