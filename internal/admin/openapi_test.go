package admin_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/admin"
)

// param is an Echo path parameter, written {name} in OpenAPI.
var param = regexp.MustCompile(`:([A-Za-z_]+)`)

// The OpenAPI document lists exactly the routes the admin API mounts, with
// the same methods.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(admin.OpenAPI(), &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not an OpenAPI 3 document: %v", err)
	}
	e := echo.New()
	admin.New(&config.Config{}, nil, nil).Mount(e)
	var mounted, documented []string
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/admin") && r.Method != echo.RouteNotFound {
			mounted = append(mounted, strings.ToLower(r.Method)+" "+param.ReplaceAllString(r.Path, "{$1}"))
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(mounted)
	slices.Sort(documented)
	if !slices.Equal(mounted, documented) {
		t.Fatalf("routes and document differ:\nmounted:    %v\ndocumented: %v", mounted, documented)
	}
}
