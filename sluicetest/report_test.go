package sluicetest

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// plantedEnv makes TestPlantedFailingCheck run; it is set only by TestReportPointsAtTheCaller.
const plantedEnv = "SLUICETEST_PLANTED_FAILURE"

// TestPlantedFailingCheck is a Check that fails (a handler without an idempotency key, a
// service that applies then fails); it runs only inside TestReportPointsAtTheCaller's child.
func TestPlantedFailingCheck(t *testing.T) {
	dir := os.Getenv(plantedEnv)
	if dir == "" {
		t.Skip("run by TestReportPointsAtTheCaller")
	}
	Check(t, charge(false, ServiceFaults{ApplyThenFail: 0.3}), Seeds(100), TimelineDir(dir)) // planted:line
}

// TestReportPointsAtTheCaller runs the planted failing Check in a child process and reads its
// report: the failure is reported at the Check call in the user's test file (not inside
// sluicetest), and the replay line names the test and the package, and replays the same
// violation when run with its token.
func TestReportPointsAtTheCaller(t *testing.T) {
	src, err := os.ReadFile("report_test.go")
	if err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(l, "// planted:line") {
			line = i + 1
		}
	}
	out := child(t, "", "^TestPlantedFailingCheck$")
	if want := "report_test.go:" + itoa(line) + ":"; !strings.Contains(out, want) {
		t.Errorf("the report does not point at the Check call (%s):\n%s", want, out)
	}
	if strings.Contains(out, "check.go:") || strings.Contains(out, "<package>") {
		t.Errorf("the report points into sluicetest or prints a placeholder:\n%s", out)
	}
	m := regexp.MustCompile(`replay:\s+SLUICETEST_SEED='([^']+)' go test -run '([^']+)' (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no replay line:\n%s", out)
	}
	if m[2] != "^TestPlantedFailingCheck$" || m[3] != "github.com/sluicehq/sluice/sluicetest" {
		t.Errorf("replay runs -run %q in %q, want the planted test in this package", m[2], m[3])
	}
	violation := regexp.MustCompile(`shrunk:\s+[^:]+: (.*)`).FindStringSubmatch(out)
	again := child(t, m[1], m[2])
	if violation == nil || !strings.Contains(again, violation[1]) {
		t.Errorf("replaying token %s did not give the same violation %q:\n%s", m[1], violation, again)
	}
}

// child runs this test binary's tests matching run with the planted failure on (and the seed
// token, if any), and returns the output of a run that must fail.
func child(t *testing.T, token, run string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", run, "-test.count=1")
	cmd.Env = append(os.Environ(), plantedEnv+"="+t.TempDir(), SeedEnv+"="+token)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the planted Check passed:\n%s", out)
	}
	return string(out)
}

func itoa(n int) string { return strconv.Itoa(n) }
