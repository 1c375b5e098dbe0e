package systems

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGBin is where Debian puts PostgreSQL 15's server programs.
var PGBin = "/usr/lib/postgresql/15/bin"

// PGCluster is a private PostgreSQL cluster under a temp dir, listening on
// 127.0.0.1 only, run as the postgres user with the default durability
// settings (fsync=on, synchronous_commit=on).
type PGCluster struct {
	root    string
	data    string
	port    int
	version string
	fsync   string
	sc      string
	wsm     string
}

func asPostgres(name string, args ...string) *exec.Cmd {
	full := append([]string{"-u", "postgres", "--", filepath.Join(PGBin, name)}, args...)
	return exec.Command("runuser", full...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartPG creates and starts a cluster under parent (a temp dir).
func StartPG(ctx context.Context, parent string) (*PGCluster, error) {
	if _, err := os.Stat(filepath.Join(PGBin, "initdb")); err != nil {
		return nil, fmt.Errorf("postgresql 15 not installed (apt-get install postgresql-15): %w", err)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(parent, 0o755); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(parent, "pg-")
	if err != nil {
		return nil, err
	}
	// The parent dirs must be traversable by postgres.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chown(root, uid, gid); err != nil {
		return nil, err
	}
	c := &PGCluster{root: root, data: filepath.Join(root, "data")}
	if out, err := asPostgres("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	c.port, err = freePort()
	if err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=on -c synchronous_commit=on -c max_connections=200", c.port, root)
	if out, err := asPostgres("pg_ctl", "-D", c.data, "-o", opts, "-l", filepath.Join(root, "server.log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(root, "server.log"))
		return nil, fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		c.Stop()
		return nil, err
	}
	defer conn.Close(ctx)
	for _, q := range []struct {
		sql string
		dst *string
	}{{"SHOW server_version", &c.version}, {"SHOW fsync", &c.fsync}, {"SHOW synchronous_commit", &c.sc}, {"SHOW wal_sync_method", &c.wsm}} {
		if err := conn.QueryRow(ctx, q.sql).Scan(q.dst); err != nil {
			c.Stop()
			return nil, fmt.Errorf("%s: %w", q.sql, err)
		}
	}
	return c, nil
}

// URL for database db.
func (c *PGCluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Describe prints the settings read back from the server.
func (c *PGCluster) Describe() string {
	return fmt.Sprintf("PostgreSQL %s private cluster on 127.0.0.1:%d, fsync=%s, synchronous_commit=%s, wal_sync_method=%s",
		strings.Fields(c.version)[0], c.port, c.fsync, c.sc, c.wsm)
}

// Exec runs one statement on the postgres database.
func (c *PGCluster) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop stops the cluster and removes its files.
func (c *PGCluster) Stop() error {
	out, err := asPostgres("pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		err = fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if rmErr := os.RemoveAll(c.root); rmErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
