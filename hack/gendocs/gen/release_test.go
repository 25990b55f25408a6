package gen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

// repoFile reads a file relative to the repository root.
func repoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKrewManifestTemplate renders plugins/dbops.yaml.tmpl the way
// krew-release-bot does ({{ .TagName }}, addURIAndSha adding uri and sha256
// lines) and checks the result is a krew Plugin for every platform
// .goreleaser.yaml builds, pointing at the archives it names.
func TestKrewManifestTemplate(t *testing.T) {
	const tag = "v1.2.3"
	tmplText := string(repoFile(t, "plugins/dbops.yaml.tmpl"))
	// The bot indents the sha256 line like the line the call stands on.
	var lines []string
	for _, l := range strings.Split(tmplText, "\n") {
		if i := strings.Index(l, "{{addURIAndSha"); i >= 0 {
			l = strings.Replace(l, "{{addURIAndSha", fmt.Sprintf("{{addURIAndSha %d", i), 1)
		}
		lines = append(lines, l)
	}
	funcs := template.FuncMap{"addURIAndSha": func(indent int, url, tagName string) (string, error) {
		var b bytes.Buffer
		if err := template.Must(template.New("url").Parse(url)).Execute(&b, map[string]string{"TagName": tagName}); err != nil {
			return "", err
		}
		return fmt.Sprintf("uri: %s\n%ssha256: %s", b.String(), strings.Repeat(" ", indent), strings.Repeat("ab", 32)), nil
	}}
	tmpl, err := template.New("krew").Funcs(funcs).Parse(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatalf("parse template: %v", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]string{"TagName": tag}); err != nil {
		t.Fatalf("render template: %v", err)
	}
	var plugin struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				Sha256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(out.Bytes(), &plugin); err != nil {
		t.Fatalf("rendered manifest is not valid YAML: %v\n%s", err, out.String())
	}
	if plugin.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || plugin.Kind != "Plugin" ||
		plugin.Metadata.Name != "dbops" || plugin.Spec.Version != tag || plugin.Spec.ShortDescription == "" || plugin.Spec.Description == "" {
		t.Errorf("unexpected manifest header: %+v", plugin)
	}

	var gr struct {
		Builds []struct {
			Goos   []string `json:"goos"`
			Goarch []string `json:"goarch"`
		} `json:"builds"`
		Archives []struct {
			NameTemplate string `json:"name_template"`
		} `json:"archives"`
	}
	if err := yaml.Unmarshal(repoFile(t, ".goreleaser.yaml"), &gr); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if len(gr.Builds) != 1 || len(gr.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml: want one build and one archive, got %d and %d", len(gr.Builds), len(gr.Archives))
	}
	if want := "{{ .ProjectName }}_{{ .Tag }}_{{ .Os }}_{{ .Arch }}"; gr.Archives[0].NameTemplate != want {
		t.Fatalf("archive name_template %q; the krew template expects %q", gr.Archives[0].NameTemplate, want)
	}
	var want, got []string
	for _, goos := range gr.Builds[0].Goos {
		for _, goarch := range gr.Builds[0].Goarch {
			ext, bin := ".tar.gz", "kubectl-dbops"
			if goos == "windows" {
				ext, bin = ".zip", "kubectl-dbops.exe"
			}
			want = append(want, fmt.Sprintf("%s/%s https://github.com/kubectl-dbops/kubectl-dbops/releases/download/%s/kubectl-dbops_%s_%s_%s%s %s",
				goos, goarch, tag, tag, goos, goarch, ext, bin))
		}
	}
	for _, p := range plugin.Spec.Platforms {
		if len(p.Sha256) != 64 {
			t.Errorf("platform %v: sha256 %q", p.Selector.MatchLabels, p.Sha256)
		}
		got = append(got, fmt.Sprintf("%s/%s %s %s", p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"], p.URI, p.Bin))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("krew platforms do not match the release archives:\n got: %s\nwant: %s",
			strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}
