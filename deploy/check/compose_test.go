package check

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads docker-compose.yml with the Compose specification's loader, as
// `docker compose` would, with SURGE_COMPOSE_SECRETS at secrets (env files read unless
// rawEnv).
func loadCompose(t *testing.T, secrets string, rawEnv bool) *types.Project {
	t.Helper()
	opts := []cli.ProjectOptionsFn{cli.WithWorkingDirectory(repoRoot), cli.WithName("surge"),
		cli.WithEnv([]string{"SURGE_COMPOSE_SECRETS=" + secrets})}
	if rawEnv {
		opts = append(opts, cli.WithoutEnvironmentResolution)
	}
	po, err := cli.NewProjectOptions([]string{filepath.Join(repoRoot, "docker-compose.yml")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := po.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

// composeSecrets runs deploy/compose/secrets.sh into a temporary directory, as an operator
// runs it before `docker compose up`.
func composeSecrets(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secrets")
	cmd := exec.Command(filepath.Join(repoRoot, "deploy", "compose", "secrets.sh"))
	cmd.Env = append(os.Environ(), "SURGE_COMPOSE_SECRETS="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/compose/secrets.sh: %v\n%s", err, out)
	}
	return dir
}

func env(s types.ServiceConfig, key string) string {
	if v, ok := s.Environment[key]; ok && v != nil {
		return *v
	}
	return ""
}

// TestCompose checks docker-compose.yml: the surge image for every surge service, a health
// check and a stop grace period on each, the engine user of each, credentials only from
// files, and the engines with their cluster and user setup.
func TestCompose(t *testing.T) {
	secrets := composeSecrets(t)
	p := loadCompose(t, secrets, false)
	raw := loadCompose(t, secrets, true)
	c := productCode(t)

	want := []string{"exporter", "gateway", "mariadb", "migrate", "mysql-users", "rabbitmq", "reconciler",
		"redis-1", "redis-2", "redis-3", "redis-4", "redis-5", "redis-6", "redis-cluster-init", "worker"}
	if got := p.ServiceNames(); !slices.Equal(sortedCopy(got), want) {
		t.Fatalf("services %v, want %v", sortedCopy(got), want)
	}

	// One-shots are the services others wait for to complete; every other one is long-running.
	oneShot := map[string]bool{}
	for _, s := range p.Services {
		for dep, d := range s.DependsOn {
			switch d.Condition {
			case types.ServiceConditionCompletedSuccessfully:
				oneShot[dep] = true
			case types.ServiceConditionHealthy:
			default:
				t.Errorf("%s waits for %s with condition %q: want service_healthy or service_completed_successfully", s.Name, dep, d.Condition)
			}
		}
	}
	for _, s := range p.Services {
		if s.StopGracePeriod == nil || *s.StopGracePeriod <= 0 {
			t.Errorf("%s: no stop_grace_period", s.Name)
		}
		if oneShot[s.Name] {
			if s.Restart != "no" {
				t.Errorf("%s is a one-shot: restart %q, want \"no\"", s.Name, s.Restart)
			}
			if s.HealthCheck == nil || !s.HealthCheck.Disable {
				t.Errorf("%s is a one-shot: disable its health check explicitly", s.Name)
			}
			continue
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q, want unless-stopped", s.Name, s.Restart)
		}
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 || s.HealthCheck.Interval == nil {
			t.Errorf("%s: no health check", s.Name)
		}
		for _, other := range p.Services {
			if d, ok := other.DependsOn[s.Name]; ok && d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s waits for %s, a long-running service, without service_healthy", other.Name, s.Name)
			}
		}
	}

	// The surge services: the image, the program, its port and probe as in the code, its user.
	type svc struct {
		name, bin, cmd, user, addrVar, probe string
		routes                               map[string]bool
	}
	for _, s := range []svc{
		{"gateway", "gateway", "serve", "surge-gateway", "HTTP_ADDR", "/readyz", c.routes["gateway"]},
		{"worker", "worker", "run", "surge-worker", "WORKER_METRICS_ADDR", "/healthz", c.routes["metrics"]},
		{"reconciler", "reconciler", "serve", "surge-reconciler", "RECONCILE_METRICS_ADDR", "/healthz", c.routes["metrics"]},
		{"exporter", "opsctl", "exporter", "surge-exporter", "", "/healthz", c.routes["metrics"]},
		{"migrate", "opsctl", "migrate", "", "", "", nil},
	} {
		sc, err := p.GetService(s.name)
		if err != nil {
			t.Fatal(err)
		}
		checkSurgeImage(t, sc)
		if len(sc.Command) < 2 || sc.Command[0] != s.bin || sc.Command[1] != s.cmd || !c.commands[s.bin][s.cmd] {
			t.Errorf("%s: command %q, want %s %s (a command services/%s accepts)", s.name, sc.Command, s.bin, s.cmd, s.bin)
		}
		if len(sc.Entrypoint) > 0 {
			t.Errorf("%s: entrypoint %q: the image has none, the command names the program", s.name, sc.Entrypoint)
		}
		if s.name == "migrate" {
			if dsn := secretOf(t, p, sc, "SURGE_MYSQL_DSN"); !strings.HasPrefix(dsn, "root:") || strings.HasPrefix(dsn, "root:@") {
				t.Errorf("migrate: its MySQL DSN must name the administrator with its password (secrets.sh writes it)")
			}
			continue
		}
		var listen, def string
		if s.addrVar != "" {
			listen, def = env(sc, "SURGE_"+s.addrVar), c.envDefault[s.addrVar]
		} else {
			i := slices.Index(sc.Command, "--addr")
			if i < 0 || i+1 >= len(sc.Command) {
				t.Fatalf("%s: %q: no --addr", s.name, sc.Command)
			}
			listen, def = sc.Command[i+1], c.exporterAddr
		}
		if !strings.HasPrefix(listen, "0.0.0.0:") || portOf(t, listen) != portOf(t, def) {
			t.Errorf("%s: listens on %q: want 0.0.0.0 and the code's default port (%s)", s.name, listen, def)
		}
		hc := sc.HealthCheck.Test
		if len(hc) != 3 || hc[0] != "CMD" || hc[1] != "/usr/local/bin/healthcheck" {
			t.Errorf("%s: health check %q, want [CMD /usr/local/bin/healthcheck URL] (the image has no shell)", s.name, hc)
		} else if u, err := url.Parse(hc[2]); err != nil || u.Hostname() != "127.0.0.1" || u.Port() != strings.TrimPrefix(listen, "0.0.0.0:") ||
			u.Path != s.probe || !s.routes[u.Path] {
			t.Errorf("%s: health check %s, want http://127.0.0.1:%s%s, a route the code serves", s.name, hc[2], strings.TrimPrefix(listen, "0.0.0.0:"), s.probe)
		}
		// Its own engine user, everywhere, from the secret files secrets.sh writes.
		if got := env(sc, "SURGE_REDIS_USER"); got != s.user {
			t.Errorf("%s: SURGE_REDIS_USER %q, want %s", s.name, got, s.user)
		}
		if pw := secretOf(t, p, sc, "SURGE_REDIS_PASSWORD"); len(pw) < 32 {
			t.Errorf("%s: its Redis password is not one of secrets.sh's", s.name)
		}
		if u, err := url.Parse(secretOf(t, p, sc, "SURGE_AMQP_URL")); err != nil || u.User.Username() != s.user || u.Host != "rabbitmq:5672" {
			t.Errorf("%s: SURGE_AMQP_URL_FILE does not connect to rabbitmq as %s", s.name, s.user)
		}
		if s.name != "exporter" {
			if dsn := secretOf(t, p, sc, "SURGE_MYSQL_DSN"); !strings.HasPrefix(dsn, s.user+":") || !strings.Contains(dsn, "@tcp(mariadb:3306)/") {
				t.Errorf("%s: SURGE_MYSQL_DSN_FILE does not connect to mariadb as %s", s.name, s.user)
			}
		} else if _, ok := sc.Environment["SURGE_MYSQL_DSN_FILE"]; ok {
			t.Errorf("exporter: it reads no MySQL: no DSN")
		}
		if len(sc.EnvFiles) > 0 {
			t.Errorf("%s: env_file %v: credentials come as compose secrets only", s.name, sc.EnvFiles)
		}
		if s.name == "gateway" {
			if len(secretOf(t, p, sc, "SURGE_ADMIN_TOKEN")) < 32 {
				t.Errorf("gateway: SURGE_ADMIN_TOKEN shorter than 32 characters")
			}
			if env(sc, "SURGE_CONSOLE_REDIS_USER") != "surge-exporter" || secretOf(t, p, sc, "SURGE_CONSOLE_REDIS_PASSWORD") == "" {
				t.Errorf("gateway: the console reads Redis nodes as surge-exporter (SURGE_CONSOLE_REDIS_USER, SURGE_CONSOLE_REDIS_PASSWORD_FILE)")
			}
		}
	}
	if rmq, _ := p.GetService("rabbitmq"); !strings.HasPrefix(rmq.Image, "rabbitmq:4") || !strings.HasSuffix(rmq.Image, "-management") ||
		!slices.ContainsFunc(rmq.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == 15672 && pc.HostIP == "127.0.0.1" }) ||
		env(rmq, "SURGE_RABBITMQ_ADMIN_PASSWORD_FILE") != "/run/secrets/rabbitmq_admin" {
		t.Errorf("rabbitmq: want a 4.x management image, its UI on 127.0.0.1:15672 and the administrator secrets.sh creates")
	}

	// Credentials: none inline. Without the env files, no surge service sees a credential
	// variable; the engines read theirs from compose secrets.
	credential := regexp.MustCompile(`PASSWORD$|TOKEN$|_DSN$|_URL$`)
	for _, s := range raw.Services {
		for k, v := range s.Environment {
			if credential.MatchString(k) {
				t.Errorf("%s: %s is set inline; credentials come from secret files", s.Name, k)
			}
			if strings.HasSuffix(k, "_FILE") && (v == nil || !strings.HasPrefix(*v, "/run/secrets/")) {
				t.Errorf("%s: %s does not name a compose secret", s.Name, k)
			}
		}
	}
	for name, sec := range p.Secrets {
		if sec.File == "" || !strings.HasPrefix(sec.File, secrets) {
			t.Errorf("secret %s: %q is not a file of deploy/compose/secrets.sh", name, sec.File)
		}
	}
	text, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"guest:guest", "surge-admin", "ALLOW_EMPTY_ROOT_PASSWORD", "-local", ":-surge}"} {
		if strings.Contains(string(text), bad) {
			t.Errorf("docker-compose.yml holds a default credential (%q)", bad)
		}
	}

	// The engines: every Redis node writes its ACL file and announces its hostname, the
	// cluster init creates or repairs, the broker and the database read their secrets.
	for i := 1; i <= 6; i++ {
		n, _ := p.GetService("redis-" + string(rune('0'+i)))
		if n.Hostname != n.Name || !slices.Equal(n.Entrypoint, []string{"bash", "/surge/deploy/compose/redis-node.sh"}) || len(n.Secrets) != 6 {
			t.Errorf("%s: want hostname %s, deploy/compose/redis-node.sh and the six password secrets", n.Name, n.Name)
		}
		if !slices.ContainsFunc(n.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Type == "volume" && v.Target == "/data" }) {
			t.Errorf("%s: no named volume on /data: nodes.conf would not survive down/up", n.Name)
		}
	}
	script, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "compose", "redis-node.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, setting := range []string{"cluster-announce-hostname $HOSTNAME", "cluster-preferred-endpoint-type hostname",
		"maxmemory-policy noeviction", "aclfile ", "users.sh\" acl-file"} {
		if !strings.Contains(string(script), setting) {
			t.Errorf("deploy/compose/redis-node.sh does not set %q", setting)
		}
	}
	init, _ := p.GetService("redis-cluster-init")
	if !slices.Equal(init.Entrypoint, []string{"bash", "/surge/deploy/compose/redis-cluster-init.sh"}) {
		t.Errorf("redis-cluster-init runs %q", init.Entrypoint)
	}
	for _, name := range []string{"gateway", "worker", "reconciler", "exporter"} {
		s, _ := p.GetService(name)
		for _, dep := range []string{"redis-cluster-init", "rabbitmq", "mysql-users"} {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s starts without waiting for %s", name, dep)
			}
		}
	}
	users, _ := p.GetService("mysql-users")
	if !slices.Equal(users.Entrypoint, []string{"bash", "/surge/deploy/users.sh", "apply", "mysql"}) || env(users, "SURGE_MYSQL_USER_HOST") != "%" {
		t.Errorf("mysql-users: want deploy/users.sh apply mysql for users at any host of the network")
	}
	if _, ok := users.DependsOn["migrate"]; !ok {
		t.Error("mysql-users must wait for the migrations (its grants name tables)")
	}
	if db, _ := p.GetService("mariadb"); env(db, "MARIADB_ROOT_PASSWORD_FILE") != "/run/secrets/mariadb_root" {
		t.Error("mariadb: the root password must come from the mariadb_root secret")
	}

	// The scripts the containers run parse, and users.sh renders the engines' files from the
	// secrets alone.
	for _, f := range []string{"deploy/users.sh", "deploy/compose/secrets.sh", "deploy/compose/redis-node.sh",
		"deploy/compose/redis-cluster-init.sh", "deploy/compose/rabbitmq-node.sh"} {
		if out, err := exec.Command("bash", "-n", filepath.Join(repoRoot, f)).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", f, err, out)
		}
	}
	render := func(arg string) string {
		cmd := exec.Command("bash", filepath.Join(repoRoot, "deploy", "users.sh"), arg)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for _, svc := range []string{"GATEWAY", "WORKER", "RECONCILER", "OPS", "EXPORTER"} {
			cmd.Env = append(cmd.Env, "SURGE_"+svc+"_PASSWORD_FILE="+filepath.Join(secrets, strings.ToLower(svc)+".password"))
		}
		cmd.Env = append(cmd.Env, "SURGE_REDIS_PASSWORD_FILE="+filepath.Join(secrets, "redis-admin.password"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("users.sh %s: %v", arg, err)
		}
		return string(out)
	}
	acl := render("acl-file")
	for _, u := range []string{"default", "surge-gateway", "surge-worker", "surge-reconciler", "surge-ops", "surge-exporter"} {
		if !regexp.MustCompile(`(?m)^user ` + u + ` on #[0-9a-f]{64} `).MatchString(acl) {
			t.Errorf("users.sh acl-file: no line for %s", u)
		}
	}
	if strings.Contains(acl, "-local") {
		t.Error("users.sh acl-file used a local default password instead of the secrets")
	}
	if defs := render("definitions"); strings.Count(defs, `"password_hash"`) != 5 || !strings.Contains(defs, `"vhosts"`) {
		t.Errorf("users.sh definitions: %s", defs)
	}
}

// checkSurgeImage: the service runs the image `make image` builds (static linux binaries),
// and compose neither builds it (a build from bin/ on a non-Linux or cgo host would make an
// image that cannot start) nor pulls another "surge" from a registry.
func checkSurgeImage(t *testing.T, s types.ServiceConfig) {
	t.Helper()
	if s.Image != "surge" {
		t.Errorf("%s: image %q, want surge", s.Name, s.Image)
	}
	if s.Build != nil {
		t.Errorf("%s: build %+v: compose must run the image make image built, never build one", s.Name, s.Build)
	}
	if s.PullPolicy != types.PullPolicyNever {
		t.Errorf("%s: pull_policy %q, want never (the image is local)", s.Name, s.PullPolicy)
	}
}

// secretOf returns the content of the compose secret a service reads its variable from:
// NAME_FILE must name /run/secrets/SECRET, a secret the service mounts, whose file secrets.sh
// wrote; the variable itself must not be set.
func secretOf(t *testing.T, p *types.Project, s types.ServiceConfig, name string) string {
	t.Helper()
	if _, ok := s.Environment[name]; ok {
		t.Errorf("%s: %s is set inline; want %s_FILE", s.Name, name, name)
	}
	path := env(s, name+"_FILE")
	secret, ok := strings.CutPrefix(path, "/run/secrets/")
	if !ok {
		t.Errorf("%s: %s_FILE=%q does not name a compose secret", s.Name, name, path)
		return ""
	}
	if !slices.ContainsFunc(s.Secrets, func(c types.ServiceSecretConfig) bool {
		return c.Source == secret && (c.Target == "" || c.Target == secret || c.Target == path)
	}) {
		t.Errorf("%s: reads %s from secret %s, which it does not mount", s.Name, name, secret)
		return ""
	}
	data, err := os.ReadFile(p.Secrets[secret].File)
	if err != nil {
		t.Errorf("%s: secret %s: %v", s.Name, secret, err)
		return ""
	}
	return string(data)
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
