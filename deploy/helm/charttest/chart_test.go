// Package charttest renders the Helm chart with Helm's own engine (no helm
// binary installs on this machine's distribution) and checks the
// manifests as Kubernetes and the gateway would read them. It is a module
// of its own so the chart's Kubernetes dependencies stay out of the
// gateway's.
package charttest

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/tollgate-dev/tollgate/config"
)

// render is `helm template` of the chart with values over its defaults:
// the manifests by template name, empty ones left out.
func render(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	ch, err := loader.Load("../tollgate")
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "tg", Namespace: "llm", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for name, doc := range out {
		if strings.TrimSpace(doc) != "" && strings.HasSuffix(name, ".yaml") {
			docs[strings.TrimPrefix(name, "tollgate/templates/")] = doc
		}
	}
	return docs
}

// decode reads a manifest strictly: a field Kubernetes does not know is
// an error, as the API server's strict validation makes it.
func decode(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
}

func TestDefaultRender(t *testing.T) {
	docs := render(t, nil)
	for _, want := range []string{"deployment.yaml", "service.yaml", "configmap.yaml", "pdb.yaml"} {
		if docs[want] == "" {
			t.Fatalf("no %s in %v", want, keys(docs))
		}
	}
	if docs["hpa.yaml"] != "" || docs["servicemonitor.yaml"] != "" {
		t.Fatal("the HPA and ServiceMonitor are optional and off by default")
	}
	var d appsv1.Deployment
	decode(t, docs["deployment.yaml"], &d)
	if d.Name != "tg-tollgate" || *d.Spec.Replicas != 2 {
		t.Fatalf("deployment %s × %d", d.Name, *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.StartupProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %v %v", c.LivenessProbe, c.ReadinessProbe)
	}
	if strings.Join(c.Args, " ") != "serve --config /etc/tollgate/tollgate.yaml --log-format json" || c.Image != "ghcr.io/tollgate-dev/tollgate:0.1.0" {
		t.Errorf("container %v %s", c.Args, c.Image)
	}
	if *pod.TerminationGracePeriodSeconds <= 30 {
		t.Errorf("grace %d: the gateway drains for 30 s", *pod.TerminationGracePeriodSeconds)
	}
	if !*c.SecurityContext.ReadOnlyRootFilesystem || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("not locked down")
	}
	if sel, labels := d.Spec.Selector.MatchLabels, d.Spec.Template.Labels; sel["app.kubernetes.io/name"] != labels["app.kubernetes.io/name"] || sel["app.kubernetes.io/instance"] != labels["app.kubernetes.io/instance"] {
		t.Errorf("selector %v does not select the pods %v", sel, labels)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no config checksum: a new config would not roll the pods")
	}
	// Secrets are references, never values.
	secrets := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets[e.Name] = true
		}
	}
	for _, name := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "REDIS_PASSWORD", "TOLLGATE_LEDGER_DSN"} {
		if !secrets[name] {
			t.Errorf("%s is not from a Secret", name)
		}
	}
	// The volumes the pod mounts exist, the config among them.
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		if _, ok := vols[m.Name]; !ok {
			t.Errorf("mount %s has no volume", m.Name)
		}
	}
	var svc corev1.Service
	decode(t, docs["service.yaml"], &svc)
	if svc.Spec.Ports[0].TargetPort.StrVal != "http" || c.Ports[0].Name != "http" || svc.Spec.Selector["app.kubernetes.io/instance"] != "tg" {
		t.Errorf("service %+v", svc.Spec)
	}
	var pdb policyv1.PodDisruptionBudget
	decode(t, docs["pdb.yaml"], &pdb)
	if pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "tg" {
		t.Errorf("pdb %+v", pdb.Spec)
	}

	// The config the pods read passes the gateway's own validation, with
	// every variable it uses given by the pod's environment.
	var cm corev1.ConfigMap
	decode(t, docs["configmap.yaml"], &cm)
	given := map[string]string{}
	for _, e := range c.Env {
		given[e.Name] = e.Value // from a Secret: stand-ins below
	}
	given["TOLLGATE_LEDGER_DSN"] = "postgres://tollgate@pg:5432/tollgate"
	cfg, err := config.Parse([]byte(cm.Data["tollgate.yaml"]), func(name string) (string, bool) {
		v, ok := given[name]
		if !ok {
			t.Errorf("the config uses ${%s}, which the pod does not set", name)
		}
		if v == "" {
			v = "secret-" + name
		}
		return v, ok
	})
	if err != nil {
		t.Fatalf("the chart's config: %v", err)
	}
	if cfg.Store.Kind != "redis" {
		t.Error("many instances need the Redis store")
	}
	// The pods' reports must agree: one ledger, PostgreSQL, that every pod
	// writes through Redis (a pod's ledger_path file is its own copy).
	if cfg.LedgerPostgres == "" {
		t.Error("the pods share no ledger: ledger_postgres is unset")
	}
}

func TestOptionalParts(t *testing.T) {
	docs := render(t, map[string]any{
		"autoscaling":       map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 12},
		"serviceMonitor":    map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"existingConfigMap": "my-config",
		"dataVolume":        map[string]any{"existingClaim": "tollgate-data"},
	})
	var hpa autoscalingv2.HorizontalPodAutoscaler
	decode(t, docs["hpa.yaml"], &hpa)
	if hpa.Spec.ScaleTargetRef.Name != "tg-tollgate" || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 12 {
		t.Errorf("hpa %+v", hpa.Spec)
	}
	var d appsv1.Deployment
	decode(t, docs["deployment.yaml"], &d)
	if d.Spec.Replicas != nil {
		t.Error("with the HPA on, the Deployment must leave replicas to it")
	}
	if docs["configmap.yaml"] != "" {
		t.Error("an existing ConfigMap: the chart makes none")
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		switch v.Name {
		case "config":
			if v.ConfigMap.Name != "my-config" {
				t.Errorf("config volume %+v", v)
			}
		case "data":
			if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "tollgate-data" {
				t.Errorf("data volume %+v", v)
			}
		}
	}
	// The ServiceMonitor is a CRD: checked as plain YAML.
	var sm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port, Path, Interval string
			} `json:"endpoints"`
		} `json:"spec"`
	}
	decode(t, docs["servicemonitor.yaml"], &sm)
	if sm.Kind != "ServiceMonitor" || sm.APIVersion != "monitoring.coreos.com/v1" || sm.Metadata.Labels["release"] != "prom" ||
		len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Port != "http" ||
		sm.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "tg" {
		t.Errorf("service monitor %+v", sm)
	}
}

// Without a config and without an existing ConfigMap the chart refuses to
// render, saying which value is missing.
func TestConfigIsRequired(t *testing.T) {
	ch, err := loader.Load("../tollgate")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, map[string]any{"config": ""}, chartutil.ReleaseOptions{Name: "tg", Namespace: "llm"}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Render(ch, vals); err == nil || !strings.Contains(err.Error(), "config (or existingConfigMap) is required") {
		t.Fatalf("render without a config: %v", err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
