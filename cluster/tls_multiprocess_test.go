package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// testPKI is a CA and one certificate it signed, as PEM files.
type testPKI struct {
	caFile, certFile, keyFile string
	cert                      tls.Certificate
	caPool                    *x509.CertPool
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name + " member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{
		caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "node.pem"), keyFile: filepath.Join(dir, "node-key.pem")}
	write := func(path, typ string, b []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.caFile, "CERTIFICATE", caDER)
	write(p.certFile, "CERTIFICATE", der)
	write(p.keyFile, "EC PRIVATE KEY", keyDER)
	p.cert, err = tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	return p
}

// handshake dials addr with cfg and completes a TLS handshake plus one
// read, which is where a TLS 1.3 server's rejection of the client
// certificate surfaces.
func handshake(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	// An HTTP/2 client preface: a server that accepted us answers with
	// its SETTINGS frame; one that refused our certificate sends an alert.
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
		return err
	}
	buf := make([]byte, 9)
	_, err = conn.Read(buf)
	return err
}

// Node-to-node traffic under mutual TLS: members with certificates from
// the cluster CA serve each other's grains; a peer without a certificate,
// or with one from another CA, cannot even complete a request.
func TestClusterTrafficUnderMutualTLS(t *testing.T) {
	pki := newTestPKI(t, "cluster")
	rogue := newTestPKI(t, "rogue")
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, ExtraArgs: []string{
		"--cluster-tls-cert", pki.certFile, "--cluster-tls-key", pki.keyFile, "--cluster-tls-ca", pki.caFile,
	}})
	c.WaitMembers(3, 20*time.Second)

	// Grains owned by every member answer through node 0: cross-node
	// requests run over the mutual-TLS remote.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servedBy := map[string]int{}
	for i := range 30 {
		r, err := c.Node(0).Probe(ctx, fmt.Sprintf("tls-%d", i), 1)
		if err != nil || r.Error != "" || r.Count != 1 {
			t.Fatalf("probe tls-%d via node 0: %+v %v", i, r, err)
		}
		servedBy[r.Node]++
	}
	if len(servedBy) != 3 {
		t.Fatalf("30 identities served by %v, want all 3 members (cross-node traffic)", servedBy)
	}

	// The cluster port refuses peers that are not members.
	addr := c.Node(1).Bind
	if err := handshake(addr, &tls.Config{RootCAs: pki.caPool, Certificates: []tls.Certificate{pki.cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}); err != nil {
		t.Fatalf("a member's certificate is refused: %v", err)
	}
	if err := handshake(addr, &tls.Config{RootCAs: pki.caPool, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}); err == nil {
		t.Fatal("a peer without a client certificate got through")
	}
	if err := handshake(addr, &tls.Config{RootCAs: pki.caPool, Certificates: []tls.Certificate{rogue.cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13}); err == nil {
		t.Fatal("a peer with another CA's certificate got through")
	}
	// Plaintext gets no HTTP/2 answer either.
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"))
	buf := make([]byte, 9)
	if n, _ := conn.Read(buf); n == 9 && buf[3] == 0x4 {
		t.Fatal("the cluster port answered plaintext HTTP/2 with SETTINGS")
	}
}
