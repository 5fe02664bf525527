package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"text/template"

	"github.com/kelseyhightower/envconfig"
)

// A field tagged `secret:"true"` (a password, a URL or DSN carrying
// credentials, a token) may also be read from a file: SURGE_<NAME>_FILE
// names it, and its content, without the trailing newline, is the value.
// That is how Docker and Kubernetes hand secrets over (a mounted file),
// and it keeps them out of the process environment, which `ps e`, crash
// reports and child processes see. Setting both SURGE_<NAME> and
// SURGE_<NAME>_FILE is refused: which one wins would be a guess.

// FileSuffix ends the name of the variable that names a secret's file.
const FileSuffix = "_FILE"

// variable is one configuration variable as envconfig resolves it.
type variable struct {
	Key   string // SURGE_REDIS_PASSWORD
	Field reflect.Value
	Tags  reflect.StructTag
}

// variables lists spec's variables with envconfig's own naming rules
// (embedded structs keep the prefix, named ones add theirs). envconfig
// hands its list out only to a usage template, so it is read there: one
// rule for the names, not a copy of it.
func variables(spec any) ([]variable, error) {
	var out []variable
	var bad error
	collect := func(v any) string {
		rv := reflect.ValueOf(v)
		f, ok := rv.FieldByName("Field").Interface().(reflect.Value)
		if !ok {
			bad = errors.New("envconfig's variable list changed shape")
			return ""
		}
		out = append(out, variable{Key: rv.FieldByName("Key").String(), Field: f,
			Tags: reflect.StructTag(rv.FieldByName("Tags").String())})
		return ""
	}
	tmpl := template.Must(template.New("vars").Funcs(template.FuncMap{"collect": collect}).
		Parse(`{{range .}}{{collect .}}{{end}}`))
	if err := envconfig.Usaget("surge", spec, &strings.Builder{}, tmpl); err != nil {
		return nil, err
	}
	return out, bad
}

// readSecretFiles sets every secret field of spec whose SURGE_<NAME>_FILE
// is set from that file.
func readSecretFiles(spec any) error {
	vars, err := variables(spec)
	if err != nil {
		return err
	}
	for _, v := range vars {
		if v.Tags.Get("secret") != "true" {
			continue
		}
		fileVar := v.Key + FileSuffix
		path, ok := os.LookupEnv(fileVar)
		if !ok {
			continue
		}
		if _, both := os.LookupEnv(v.Key); both {
			return fmt.Errorf("%s and %s are both set: set only one (the file is for secrets mounted by Docker or Kubernetes)",
				v.Key, fileVar)
		}
		if path == "" {
			return fmt.Errorf("%s is empty: name the file holding %s, or unset it", fileVar, v.Key)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%s: read the file holding %s: %w", fileVar, v.Key, err)
		}
		value := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if value == "" {
			return fmt.Errorf("%s=%s: the file is empty; it must hold %s", fileVar, path, v.Key)
		}
		if v.Field.Kind() != reflect.String || !v.Field.CanSet() {
			return fmt.Errorf("%s: only a string setting can be read from a file", fileVar)
		}
		v.Field.SetString(value)
	}
	return nil
}
