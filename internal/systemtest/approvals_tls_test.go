package systemtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgrain/mcpgrain/internal/app"
	"github.com/mcpgrain/mcpgrain/internal/mcpclient"
	"github.com/mcpgrain/mcpgrain/internal/testcluster"
)

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpgrain test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		// IsCA lets the certificate verify itself as its own root (--tls-ca).
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A node serves the ApprovalService over TLS: the CLI trusting its
// certificate approves a pause; a plaintext client and one that does not
// trust the certificate are refused.
func TestApprovalServiceOverTLS(t *testing.T) {
	bin := testcluster.Binary(t)
	cert, key := selfSigned(t)
	info := startCodeNode(t, func(c *app.Config) { c.GRPCTLSCert, c.GRPCTLSKey = cert, key })
	cs := connectMode(t, info.HTTPAddr, aliceToken, "")
	id := pause(t, cs, "waiting_for_interaction")
	tok := tokenFile(t, aliceToken)

	out, err := mcpgrainCLI(t, bin, "approve", "accept", id, "--grpc", info.GRPCAddr, "--token-file", tok, "--tls-ca", cert)
	if err != nil || strings.TrimSpace(out) != id+": accepted" {
		t.Fatalf("accept over TLS: %v\n%s", err, out)
	}
	// A plaintext client cannot talk to the TLS endpoint, and a client that
	// does not trust the certificate refuses it.
	if out, err := mcpgrainCLI(t, bin, "approve", "list", "--grpc", info.GRPCAddr, "--token-file", tok, "--timeout", "3s"); err == nil {
		t.Fatalf("plaintext client listed over TLS:\n%s", out)
	}
	if out, err := mcpgrainCLI(t, bin, "approve", "list", "--grpc", info.GRPCAddr, "--token-file", tok, "--tls", "--timeout", "3s"); err == nil {
		t.Fatalf("untrusted certificate accepted:\n%s", out)
	}
	res, sc := callTool(t, cs, "resume", map[string]any{"executionId": id, "action": "accept"})
	if res.IsError || sc["status"] != "completed" {
		t.Fatalf("resume: %s", mcpclient.Text(res))
	}
}
