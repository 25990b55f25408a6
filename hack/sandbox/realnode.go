package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// Demo etcd cluster on the real nodes (`sandbox up --real-nodes`): etcd in containers with
// /readyz readiness probes, as on a real cluster.
const (
	realEtcdNamespace = "rn-etcd"
	realEtcdName      = "etcd"
)

// installRealEtcd creates the real-node etcd demo cluster and waits until its 3 pods are Ready.
func installRealEtcd(ctx context.Context, tb *testbed.Testbed) ([]string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realEtcdNamespace}}
	if _, err := tb.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	objs := testbed.RealEtcdObjects(realEtcdNamespace, realEtcdName, 3)
	if _, err := tb.Client.CoreV1().Services(realEtcdNamespace).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service: %w", err)
	}
	if _, err := tb.Client.CoreV1().ConfigMaps(realEtcdNamespace).Create(ctx, objs.ConfigMap, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create configmap: %w", err)
	}
	if _, err := tb.Client.AppsV1().StatefulSets(realEtcdNamespace).Create(ctx, objs.StatefulSet, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create statefulset: %w", err)
	}
	if err := tb.WaitPodsReady(ctx, realEtcdNamespace, "app.kubernetes.io/instance="+realEtcdName, 3); err != nil {
		return nil, err
	}
	return []string{
		"kubectl get nodes -L " + testbed.RealNodeLabel + "," + testbed.ZoneLabel,
		"kubectl dbops status etcd -n " + realEtcdNamespace,
		"kubectl dbops scale etcd -n " + realEtcdNamespace + " --replicas 5",
		"kubectl dbops restart etcd -n " + realEtcdNamespace + " --rolling",
		"kubectl exec -n " + realEtcdNamespace + " etcd-0 -- etcdctl member list -w table",
	}, nil
}
