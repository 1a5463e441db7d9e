package k8sjob

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client returns a clientset with the operator's credentials: the kube
// config file at kubeconfig (KUBECONFIG) when given, else the pod's own
// service account (in-cluster). It reads files but does not dial: a
// cluster that is away shows at the first call.
func Client(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = "agentflow-worker"
	return kubernetes.NewForConfig(cfg)
}
