package config

// Var is one SURGE_ variable a configuration reads, for a program's
// --help.
type Var struct {
	// Name is the variable, SURGE_REDIS_ADDRS.
	Name string
	// Default is the value taken when it is unset; empty for none.
	Default string
	// Secret says the value may instead be read from the file that
	// Name+"_FILE" names; its default is not shown.
	Secret bool
}

// Vars lists the variables spec (a pointer to a configuration struct, as
// Load takes) reads, in declaration order, under envconfig's own naming
// rules.
func Vars(spec any) ([]Var, error) {
	vars, err := variables(spec)
	if err != nil {
		return nil, err
	}
	out := make([]Var, 0, len(vars))
	for _, v := range vars {
		out = append(out, Var{Name: v.Key, Default: v.Tags.Get("default"), Secret: v.Tags.Get("secret") == "true"})
	}
	return out, nil
}
