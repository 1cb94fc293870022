package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// adminUser is the user of the admin token; system:masters may do anything.
const adminUser = "admin"

// credentials are the files kube-apiserver needs for TLS, service account
// tokens and token authentication, made before it starts so that the CA is
// known up front and survives RestartAPIServer.
type credentials struct {
	certFile, keyFile    string // kube-apiserver's serving certificate and key
	caData               []byte // PEM: the serving certificate and the CA that signed it
	saKeyFile, saPubFile string // service account token signing key pair
	tokenFile            string // --token-auth-file
	adminToken           string
	userTokens           map[string]string // user name -> token
}

// newCredentials writes every credential file into dir.
func newCredentials(dir string, users []User) (*credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	cr := &credentials{
		certFile:   filepath.Join(dir, "apiserver.crt"),
		keyFile:    filepath.Join(dir, "apiserver.key"),
		saKeyFile:  filepath.Join(dir, "sa.key"),
		saPubFile:  filepath.Join(dir, "sa.pub"),
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		userTokens: make(map[string]string, len(users)),
	}
	if err := cr.writeServingCert(); err != nil {
		return nil, fmt.Errorf("write serving certificate: %w", err)
	}
	if err := cr.writeServiceAccountKeys(); err != nil {
		return nil, fmt.Errorf("write service account keys: %w", err)
	}
	if err := cr.writeTokens(users); err != nil {
		return nil, fmt.Errorf("write token file: %w", err)
	}
	return cr, nil
}

// writeServingCert makes a self-signed CA and a serving certificate for
// 127.0.0.1 and localhost; certutil writes the two into one PEM bundle,
// which is also what clients trust.
func (cr *credentials) writeServingCert() error {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1",
		[]net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return err
	}
	cr.caData = certPEM
	if err := os.WriteFile(cr.certFile, certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(cr.keyFile, keyPEM, 0o600)
}

// writeServiceAccountKeys makes the key pair kube-apiserver signs service
// account tokens with (and kube-controller-manager, for legacy tokens).
func (cr *credentials) writeServiceAccountKeys() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(cr.saKeyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(cr.saPubFile, pubPEM, 0o600)
}

// writeTokens writes the static token file: one line per user,
// "token,user,uid,groups", the admin in system:masters.
func (cr *credentials) writeTokens(users []User) error {
	var err error
	if cr.adminToken, err = randomToken(); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s,%s,%s,\"system:masters\"\n", cr.adminToken, adminUser, adminUser)
	for _, u := range users {
		if !validUserName(u.Name) || u.Name == adminUser {
			return fmt.Errorf("invalid user name %q", u.Name)
		}
		if _, dup := cr.userTokens[u.Name]; dup {
			return fmt.Errorf("duplicate user %q", u.Name)
		}
		for _, g := range u.Groups {
			if !validUserName(g) {
				return fmt.Errorf("user %q: invalid group %q", u.Name, g)
			}
		}
		token, err := randomToken()
		if err != nil {
			return err
		}
		cr.userTokens[u.Name] = token
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", token, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	return os.WriteFile(cr.tokenFile, []byte(b.String()), 0o600)
}

func randomToken() (string, error) {
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("make token: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// restConfig returns a client configuration that authenticates with token.
func (cr *credentials) restConfig(server, token string) *rest.Config {
	return &rest.Config{
		Host:            server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cr.caData},
	}
}

// writeKubeconfig writes a kubeconfig file for one token user.
func (cr *credentials) writeKubeconfig(path, server, user, token string) error {
	const name = "watcher-local"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cr.caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
