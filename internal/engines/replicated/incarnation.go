package replicated

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationRoleIncarnation on a pod records which run of the application container the
// role label was given to: "<container>:<restartCount>:<startedAt RFC 3339>". The kubelet
// restarts a crashed container in place (same pod UID, labels kept, restartCount up, a newer
// startedAt), and the new process serves no role until told; a label older than the running
// container is therefore not trusted (docs/procedures.md, Replicated applications).
const AnnotationRoleIncarnation = "dbops.io/role-incarnation"

// appContainer is the container the commands run in: the configured one, else the pod's
// first (exec's default).
func appContainer(p *corev1.Pod, name string) string {
	if name == "" && len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return name
}

// incarnation describes the running instance of container name in p; "" when its status is
// not known (no status yet, not running).
func incarnation(p *corev1.Pod, name string) string {
	name = appContainer(p, name)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != name {
			continue
		}
		started := ""
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s:%d:%s", name, cs.RestartCount, started)
	}
	return ""
}

// staleRole says why p's role label predates its running container ("" when it does not,
// or when there is nothing to compare: no annotation from an older run, no status).
func staleRole(p *corev1.Pod, container string) string {
	rec := p.Annotations[AnnotationRoleIncarnation]
	now := incarnation(p, container)
	if rec == "" || now == "" || rec == now {
		return ""
	}
	rname, rrest, _ := strings.Cut(rec, ":")
	rcount, rstart, _ := strings.Cut(rrest, ":")
	_, nrest, _ := strings.Cut(now, ":")
	ncount, nstart, _ := strings.Cut(nrest, ":")
	if rname != appContainer(p, container) {
		return ""
	}
	rc, err1 := strconv.Atoi(rcount)
	nc, err2 := strconv.Atoi(ncount)
	switch {
	case err1 == nil && err2 == nil && nc > rc:
		return fmt.Sprintf("container %s restarted since the label was set (restartCount %d -> %d)", rname, rc, nc)
	case rstart != "" && nstart != "" && nstart != rstart:
		return fmt.Sprintf("container %s started again since the label was set (%s -> %s)", rname, rstart, nstart)
	}
	return ""
}
