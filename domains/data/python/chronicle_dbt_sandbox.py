"""A dbt-duckdb plugin that puts dbt's DuckDB connection in the analyst's sandbox: the same
settings as the server's own connections (`sandbox.connect`), so a model of a dbt project in the
workspace cannot read or write outside it either. The server names it in the profile it writes
(`plugins: [{module: chronicle_dbt_sandbox, config: {workspace: ...}}]`) and puts this folder on
dbt's PYTHONPATH.
"""

from dbt.adapters.duckdb.plugins import BasePlugin

from sandbox import sql_string


class Plugin(BasePlugin):
    def initialize(self, plugin_config):
        self.workspace = plugin_config["workspace"]

    def update_connection_config(self, creds, config):
        config["autoinstall_known_extensions"] = False
        config["autoload_known_extensions"] = False

    def configure_connection(self, conn):
        conn.execute(f"SET allowed_directories = [{sql_string(self.workspace.rstrip('/') + '/')}]")
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
