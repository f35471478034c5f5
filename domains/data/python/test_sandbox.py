"""The sandbox below the MCP layer: what DuckDB refuses on a sandboxed connection, the mapping of
`/workspace/...` paths, and dbt's own connection (the chronicle_dbt_sandbox plugin). The engine's
black-box tests (tests/data.rs) drive the same server through MCP.

    target/data-venv/bin/python -m unittest discover -s domains/data/python
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import sandbox  # noqa: E402


class Workspace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.ws = os.path.realpath(os.path.join(self.tmp, "ws"))
        self.other = os.path.realpath(os.path.join(self.tmp, "ws-other"))
        os.makedirs(self.ws)
        os.makedirs(self.other)
        with open(os.path.join(self.other, "secret.csv"), "w") as f:
            f.write("secret\n42\n")
        with open(os.path.join(self.ws, "mine.csv"), "w") as f:
            f.write("a\n1\n")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def refused(self, con, sql):
        with self.assertRaises(duckdb.Error, msg=sql) as caught:
            con.execute(sandbox.workspace_sql(self.ws, sql))
        return str(caught.exception)

    def test_sql_reaches_nothing_outside_the_workspace(self):
        con = sandbox.connect(self.ws)
        try:
            self.assertEqual(con.execute(sandbox.workspace_sql(
                self.ws, "SELECT * FROM read_csv('/workspace/mine.csv')")).fetchall(), [(1,)])
            for sql in [
                "SELECT * FROM read_csv('/etc/passwd')",
                f"SELECT * FROM read_csv('{self.other}/secret.csv')",
                "SELECT * FROM read_csv('/workspace/../ws-other/secret.csv')",
                "SELECT * FROM read_csv('mine.csv')",
                f"ATTACH '{self.other}/db.duckdb' AS o",
                "INSTALL httpfs",
                f"COPY (SELECT 1) TO '{self.other}/out.csv'",
                "SELECT * FROM read_csv('https://example.com/x.csv')",
                "SELECT * FROM glob('/etc/*')",
            ]:
                self.assertIn("Permission Error", self.refused(con, sql))
            for sql in [
                "SET enable_external_access = true",
                "SET allowed_directories = ['/']",
                "SET lock_configuration = false",
                "RESET lock_configuration",
            ]:
                self.assertIn("the configuration has been locked", self.refused(con, sql))
        finally:
            con.close()
        self.assertEqual(sorted(os.listdir(self.other)), ["secret.csv"], "nothing was written")

    def test_paths_map_to_the_workspace_or_are_refused(self):
        self.assertEqual(sandbox.real_path(self.ws, "/workspace/a/b.csv"), f"{self.ws}/a/b.csv")
        self.assertEqual(sandbox.real_path(self.ws, "a/b.csv"), f"{self.ws}/a/b.csv")
        for path in ["/etc/passwd", "/workspace/../ws-other/secret.csv", "../ws-other", "/workspacex/a", ""]:
            with self.assertRaises(sandbox.Refused, msg=path):
                sandbox.real_path(self.ws, path)
        os.symlink(self.other, os.path.join(self.ws, "out"))
        with self.assertRaises(sandbox.Refused):
            sandbox.real_path(self.ws, "/workspace/out/secret.csv")
        with self.assertRaises(sandbox.Refused) as caught:
            sandbox.check_links(self.ws)
        self.assertEqual(
            str(caught.exception),
            "/workspace/out is a link leading outside the workspace; remove it before running SQL",
        )

    def test_only_workspace_literals_are_rewritten(self):
        sql = (
            "SELECT '/workspace/x.csv', 'it''s /workspace/', \"/workspace/col\" -- '/workspace/c'\n"
            "/* '/workspace/d' */ FROM '/workspace'"
        )
        self.assertEqual(
            sandbox.workspace_sql("/w/s", sql),
            "SELECT '/w/s/x.csv', 'it''s /workspace/', \"/workspace/col\" -- '/workspace/c'\n"
            "/* '/workspace/d' */ FROM '/w/s'",
        )

    def test_dbt_runs_in_the_sandbox_too(self):
        project = os.path.join(self.ws, "dbt")
        os.makedirs(os.path.join(project, "models"))
        with open(os.path.join(project, "dbt_project.yml"), "w") as f:
            f.write("name: p\nversion: '1.0'\nconfig-version: 2\nprofile: analyst\n")
        with open(os.path.join(project, "models", "leak.sql"), "w") as f:
            f.write(f"select * from read_csv('{self.other}/secret.csv')")
        with open(os.path.join(self.ws, "profiles.yml"), "w") as f:
            f.write(
                "analyst:\n  target: t\n  outputs:\n    t:\n      type: duckdb\n"
                f"      path: {self.ws}/analyst.duckdb\n      threads: 1\n"
                "      plugins:\n        - module: chronicle_dbt_sandbox\n"
                f"          config: {{workspace: {self.ws}}}\n"
            )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": self.ws,
            "PYTHONPATH": HERE,
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "DBT_VERSION_CHECK": "false",
            "DBT_PROFILES_DIR": self.ws,
        }
        dbt = os.path.join(os.path.dirname(sys.executable), "dbt")
        done = subprocess.run(
            [dbt, "run", "--project-dir", project], cwd=self.ws, env=env,
            capture_output=True, text=True, timeout=120,
        )
        self.assertNotEqual(done.returncode, 0, done.stdout)
        self.assertIn("Permission Error", done.stdout)
        con = duckdb.connect(os.path.join(self.ws, "analyst.duckdb"), read_only=True)
        try:
            self.assertEqual(con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0], 0)
        finally:
            con.close()


if __name__ == "__main__":
    unittest.main()
