package testbed

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Context names one testbed in a fleet kubeconfig.
type Context struct {
	Name string
	Bed  *Testbed
}

// WriteFleetKubeconfig writes ONE kubeconfig at path with a context (and a cluster and user of
// the same name) per testbed, for fleet commands over several control planes. The current
// context is the first one.
func WriteFleetKubeconfig(path string, ctxs ...Context) error {
	cfg := clientcmdapi.NewConfig()
	for _, c := range ctxs {
		if _, dup := cfg.Contexts[c.Name]; dup {
			return fmt.Errorf("fleet kubeconfig: context %q given twice", c.Name)
		}
		if c.Bed.pki == nil {
			return fmt.Errorf("fleet kubeconfig: context %q: testbed has no PKI (detached or not started)", c.Name)
		}
		cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Bed.APIServerURL, CertificateAuthorityData: c.Bed.pki.caPEM}
		cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Bed.pki.certPEM, ClientKeyData: c.Bed.pki.key}
		cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name, Namespace: "default"}
		if cfg.CurrentContext == "" {
			cfg.CurrentContext = c.Name
		}
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write fleet kubeconfig: %w", err)
	}
	return nil
}
