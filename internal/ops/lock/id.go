package lock

import (
	"fmt"
	"net/url"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// anonymousUser stands in for a kubeconfig context without a user.
const anonymousUser = "anonymous"

// DefaultID derives a lock ID from the kubeconfig user and the API server
// address: "<user>@<host[:port]>", e.g. "alice@api.example:6443". It names
// the person and the cluster endpoint they act through, which is what a
// colleague needs to find them.
func DefaultID(user, server string) string {
	user = strings.TrimSpace(user)
	if user == "" {
		user = anonymousUser
	}
	host := serverHost(server)
	if host == "" {
		return user
	}
	return user + "@" + host
}

// IDFromKubeconfig returns DefaultID for the user and cluster server of the
// named context (the current context when contextName is empty); as, when
// set, is the user the requests impersonate (--as) and names the person, as
// does the context user's own `as:` (its requests impersonate that user too).
func IDFromKubeconfig(cfg clientcmdapi.Config, contextName, as string) (string, error) {
	if contextName == "" {
		contextName = cfg.CurrentContext
	}
	kctx, ok := cfg.Contexts[contextName]
	if contextName == "" || !ok || kctx == nil {
		return "", fmt.Errorf("kubeconfig context %q not found", contextName)
	}
	server := ""
	if cl, ok := cfg.Clusters[kctx.Cluster]; ok && cl != nil {
		server = cl.Server
	}
	user := kctx.AuthInfo
	if ai, ok := cfg.AuthInfos[kctx.AuthInfo]; ok && ai != nil && ai.Impersonate != "" {
		user = ai.Impersonate
	}
	if as != "" {
		user = as
	}
	return DefaultID(user, server), nil
}

// serverHost extracts host[:port] from a server URL, tolerating a bare
// host without scheme.
func serverHost(server string) string {
	server = strings.TrimSpace(server)
	if server == "" {
		return ""
	}
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return strings.TrimPrefix(server, "https://")
	}
	return u.Host
}
