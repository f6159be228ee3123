package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	line    int
	keyword string
	args    string
}

type stage struct {
	name, base   string
	instructions []instruction
}

// parseDockerfile returns the stages, each base with the default of a build argument it
// names (`FROM ${BASE_IMAGE}`) put in, and those defaults.
func parseDockerfile(t *testing.T, text string) ([]stage, map[string]string) {
	t.Helper()
	var stages []stage
	args := map[string]string{}
	var pending strings.Builder
	startLine := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if pending.Len() == 0 {
			startLine = i + 1
		}
		if strings.HasSuffix(line, `\`) {
			pending.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		pending.WriteString(line)
		full := pending.String()
		pending.Reset()
		fields := strings.SplitN(full, " ", 2)
		in := instruction{line: startLine, keyword: strings.ToUpper(fields[0])}
		if len(fields) == 2 {
			in.args = strings.TrimSpace(fields[1])
		}
		if in.keyword == "FROM" {
			parts := strings.Fields(in.args)
			s := stage{base: argReference.ReplaceAllStringFunc(parts[0], func(ref string) string {
				return args[argReference.FindStringSubmatch(ref)[1]]
			})}
			if len(parts) == 3 && strings.EqualFold(parts[1], "AS") {
				s.name = parts[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.keyword != "ARG" {
				t.Errorf("line %d: %s before the first FROM", in.line, in.keyword)
			} else if name, value, ok := strings.Cut(in.args, "="); ok {
				args[name] = value
			}
			continue
		}
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
	}
	if pending.Len() > 0 {
		t.Error("the Dockerfile ends inside a continued line")
	}
	return stages, args
}

var (
	pinnedImage = regexp.MustCompile(`^[a-z0-9.-]+(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]+)?@sha256:[a-f0-9]{64}$|^[a-z0-9._-]+(:[A-Za-z0-9._-]+)?@sha256:[a-f0-9]{64}$`)
	numericUser = regexp.MustCompile(`^([0-9]+)(:[0-9]+)?$`)
	execForm    = regexp.MustCompile(`^\[\s*".*"\s*\]$`)
	downloads   = regexp.MustCompile(`\b(curl|wget)\s+-`)
	// ${NAME} in a FROM line: a build argument declared before the first FROM.
	argReference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// deploy/docker/Dockerfile, checked without a Docker engine: pinned bases, files that
// exist, numeric non-root users, no shell in the runtime images, verified downloads.
func TestDockerfileIsPinnedAndMinimal(t *testing.T) {
	root := sourceDir(t)
	text := readFile(t, root, "deploy", "docker", "Dockerfile")
	stages, args := parseDockerfile(t, text)
	// By default the agent is compiled and kubectl downloaded and checked; `make images`
	// chooses the prebuilt stages instead.
	if args["AGENT_FROM"] != "build" || args["KUBECTL_FROM"] != "kubectl-download" {
		t.Errorf("AGENT_FROM=%q KUBECTL_FROM=%q by default, want build and kubectl-download",
			args["AGENT_FROM"], args["KUBECTL_FROM"])
	}
	byName := map[string]stage{}
	runtime := map[string]bool{}
	prebuilt := map[string]bool{}
	for _, s := range stages {
		_, earlier := byName[s.base]
		switch {
		case s.base == "scratch":
			prebuilt[s.name] = true
		case earlier:
			runtime[s.name] = runtime[s.base]
		case pinnedImage.MatchString(s.base):
			runtime[s.name] = strings.Contains(s.base, "distroless")
		default:
			t.Errorf("stage %s: base image %q is neither an earlier stage nor pinned by sha256 digest", s.name, s.base)
		}
		if strings.Contains(s.base, ":latest") {
			t.Errorf("stage %s: base image uses :latest", s.name)
		}
		byName[s.name] = s
	}
	for _, target := range []string{"agent", "cluster"} {
		s, ok := byName[target]
		if !ok {
			t.Fatalf("no %q stage", target)
		}
		if !runtime[target] {
			t.Errorf("stage %s is not built on the distroless runtime base", target)
		}
		user, entrypoint := "", ""
		for _, in := range s.instructions {
			switch in.keyword {
			case "USER":
				user = in.args
			case "ENTRYPOINT":
				entrypoint = in.args
			}
		}
		match := numericUser.FindStringSubmatch(user)
		if match == nil || match[1] == "0" {
			t.Errorf("stage %s: USER %q is not a numeric non-root user", target, user)
		} else if match[1] != "65532" {
			t.Errorf("stage %s: USER %s differs from the chart's runAsUser 65532", target, match[1])
		}
		var argv []string
		if err := json.Unmarshal([]byte(entrypoint), &argv); err != nil || len(argv) == 0 || argv[0] != "/usr/local/bin/uplink-agent" {
			t.Errorf("stage %s: ENTRYPOINT %q is not the agent in exec form", target, entrypoint)
		}
	}

	// The prebuilt stages copy what `make images` puts in its own build context.
	imagesScript := readFile(t, root, "deploy", "docker", "images.sh")
	dockerignore := readFile(t, root, "deploy", "docker", "Dockerfile.dockerignore")
	var included []string
	for _, line := range strings.Split(dockerignore, "\n") {
		if strings.HasPrefix(line, "!") {
			included = append(included, strings.TrimSuffix(strings.TrimPrefix(line, "!"), "/"))
		}
	}
	sawMakeBuild := false
	for _, s := range stages {
		for _, in := range s.instructions {
			where := s.name + " line " + strconv.Itoa(in.line)
			switch in.keyword {
			case "ADD":
				t.Errorf("%s: ADD (use COPY, and verified downloads in RUN)", where)
			case "COPY":
				if strings.Contains(in.args, "--from=") {
					continue
				}
				fields := strings.Fields(in.args)
				for _, source := range fields[:len(fields)-1] {
					path := strings.TrimSuffix(source, "/")
					if prebuilt[s.name] {
						if !strings.Contains(imagesScript, `"$work/context/`+path+`"`) {
							t.Errorf("%s: COPY source %s is not what images.sh puts in its context", where, source)
						}
						continue
					}
					if _, err := os.Stat(filepath.Join(root, path)); err != nil {
						t.Errorf("%s: COPY source %s does not exist in the repository", where, source)
					}
					allowed := false
					for _, inc := range included {
						if path == inc {
							allowed = true
						}
					}
					if !allowed {
						t.Errorf("%s: COPY source %s is excluded by Dockerfile.dockerignore", where, source)
					}
				}
			case "RUN":
				if runtime[s.name] && !execForm.MatchString(in.args) {
					t.Errorf("%s: shell-form RUN in a runtime image, which has no shell", where)
				}
				if strings.Contains(in.args, "make build") {
					sawMakeBuild = true
				}
				if downloads.MatchString(in.args) &&
					!strings.Contains(in.args, "sha256sum -c") {
					t.Errorf("%s: downloads without checking a pinned SHA-256", where)
				}
				if strings.Contains(in.args, "apt-get install") && !strings.Contains(in.args, "--no-install-recommends") {
					t.Errorf("%s: apt-get install without --no-install-recommends", where)
				}
			}
		}
	}
	if !sawMakeBuild {
		t.Error("the build stage does not run `make build`")
	}
	for _, arg := range []string{
		`ARG KUBECTL_VERSION=v[0-9]+\.[0-9]+\.[0-9]+\n`,
		`ARG KUBECTL_SHA256_AMD64=[a-f0-9]{64}\n`,
		`ARG KUBECTL_SHA256_ARM64=[a-f0-9]{64}\n`,
	} {
		if !regexp.MustCompile(arg).MatchString(text) {
			t.Errorf("Dockerfile lacks a pinned %s", strings.TrimSuffix(arg, `\n`))
		}
	}

	// The README that documents refreshing the pins names the ones in force.
	readme := readFile(t, root, "deploy", "docker", "README.md")
	for _, pin := range regexp.MustCompile(`sha256:[a-f0-9]{64}|[a-f0-9]{64}|v[0-9]+\.[0-9]+\.[0-9]+`).FindAllString(text, -1) {
		if !strings.Contains(readme, pin) {
			t.Errorf("deploy/docker/README.md does not mention the pin %s", pin)
		}
	}
}
