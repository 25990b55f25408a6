package testbed

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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EtcdTLSMountPath is where RealEtcdTLSObjects mounts its certificate Secret.
const EtcdTLSMountPath = "/etc/etcd/tls"

// EtcdPKI are the PEM files of a TLS etcd cluster: one CA; a server certificate for the
// members' client port (server and client usage, as kubeadm issues etcd's server certificate);
// a peer certificate; a client certificate with CN root for the test's own etcdctl; and a
// client certificate without a Common Name (etcd's gateway refuses client certificates that
// carry one when --client-cert-auth and auth are on: embed/serve.go).
type EtcdPKI struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey, ClientCert, ClientKey []byte
	NoCNClientCert, NoCNClientKey                                       []byte
}

// NewEtcdPKI issues the certificates for the members of StatefulSet name behind Service
// service in namespace: the DNS names of pods 0..maxPods-1 (and the Service wildcard),
// localhost and 127.0.0.1.
func NewEtcdPKI(namespace, name, service string, maxPods int) (*EtcdPKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	var dns []string
	for _, domain := range []string{"svc.cluster.local", "svc"} {
		base := fmt.Sprintf("%s.%s.%s", service, namespace, domain)
		dns = append(dns, "*."+base)
		for o := range maxPods {
			dns = append(dns, fmt.Sprintf("%s-%d.%s", name, o, base))
		}
	}
	dns = append(dns, "localhost")
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	issue := func(serial int64, cn string, usages []x509.ExtKeyUsage, withSANs bool) ([]byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usages}
		if withSANs {
			tmpl.DNSNames, tmpl.IPAddresses = dns, ips
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate %s: %w", cn, err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
	}
	p := &EtcdPKI{CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if p.ServerCert, p.ServerKey, err = issue(2, name+"-server", both, true); err != nil {
		return nil, err
	}
	if p.PeerCert, p.PeerKey, err = issue(3, name+"-peer", both, true); err != nil {
		return nil, err
	}
	if p.ClientCert, p.ClientKey, err = issue(4, "root", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false); err != nil {
		return nil, err
	}
	if p.NoCNClientCert, p.NoCNClientKey, err = issue(5, "", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false); err != nil {
		return nil, err
	}
	return p, nil
}

// Secret holds the files the members mount (and the client pair, for --etcd-cert tests).
func (p *EtcdPKI) Secret(namespace, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": p.CA, "server.crt": p.ServerCert, "server.key": p.ServerKey,
			"peer.crt": p.PeerCert, "peer.key": p.PeerKey, "client.crt": p.ClientCert, "client.key": p.ClientKey,
			"client-nocn.crt": p.NoCNClientCert, "client-nocn.key": p.NoCNClientKey},
	}
}

// RealEtcdTLSObjects is RealEtcdObjects with TLS as secured etcd deployments run it: clients
// and peers over https with the certificates of Secret tlsSecret mounted at EtcdTLSMountPath,
// client certificates required (--client-cert-auth), the client port bound to the pod IP only
// (not 127.0.0.1), DNS names advertised, and /readyz served on a plain metrics port for the
// readiness probe (the kubelet has no client certificate), as kubeadm does.
func RealEtcdTLSObjects(namespace, name string, replicas int32, tlsSecret string) RealEtcd {
	objs := RealEtcdObjects(namespace, name, replicas)
	svc := objs.Service.Name
	var initial []string
	for o := range replicas {
		pod := fmt.Sprintf("%s-%d", name, o)
		initial = append(initial, fmt.Sprintf("%s=https://%s.%s.%s.svc.cluster.local:2380", pod, pod, svc, namespace))
	}
	objs.ConfigMap.Data["ETCD_INITIAL_CLUSTER"] = strings.Join(initial, ",")
	self := fmt.Sprintf("$(MY_POD_NAME).%s.%s.svc.cluster.local", svc, namespace)
	spec := &objs.StatefulSet.Spec.Template.Spec
	c := &spec.Containers[0]
	f := func(file string) string { return EtcdTLSMountPath + "/" + file }
	c.Args = []string{
		"--name=$(MY_POD_NAME)",
		"--data-dir=/var/lib/etcd/data",
		"--listen-client-urls=https://$(POD_IP):2379",
		"--advertise-client-urls=https://" + self + ":2379",
		"--listen-peer-urls=https://0.0.0.0:2380",
		"--initial-advertise-peer-urls=https://" + self + ":2380",
		"--listen-metrics-urls=http://0.0.0.0:2381",
		"--client-cert-auth",
		"--trusted-ca-file=" + f("ca.crt"),
		"--cert-file=" + f("server.crt"),
		"--key-file=" + f("server.key"),
		"--peer-trusted-ca-file=" + f("ca.crt"),
		"--peer-cert-file=" + f("peer.crt"),
		"--peer-key-file=" + f("peer.key"),
		"--election-timeout=2000",
		"--heartbeat-interval=200",
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 2381})
	c.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(2381)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: EtcdTLSMountPath, ReadOnly: true})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: tlsSecret}}})
	return objs
}
