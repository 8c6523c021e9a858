"""The results database's migrations from version 23 on, joined to the earlier ones by
`schema.MIGRATIONS` (one module would outgrow the length every module keeps to). The same
rule: a migration, once released, never changes."""

from __future__ import annotations

from pgbenchlab.store.columns import added_columns_sql

LATER: dict[int, str] = {
    # 23: where the plan placed a run's processes by NUMA policy, and the memory nodes and
    # policy the kernel showed; NULL before.
    23: """
    ALTER TABLE run_affinity ADD COLUMN numa_requested TEXT;
    ALTER TABLE run_affinity ADD COLUMN memory_nodes TEXT;
    ALTER TABLE run_affinity ADD COLUMN numa_policies TEXT;
    """,
    # 24: noise floors measured for a campaign's servers, per metric and kind (run to run,
    # restart to restart, build to build): an equivalence margin below the build-to-build
    # floor is refused. Campaigns stored before it: none.
    24: """
    CREATE TABLE noise_floors (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        metric TEXT NOT NULL,
        kind TEXT NOT NULL,
        spread REAL NOT NULL,
        evidence TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX noise_floors_campaign ON noise_floors (campaign_id, metric);
    """,
    # 25: counted runs (`count = "instructions"`): the client backends' instructions per
    # committed transaction and the tool that counted them; a profile may be counted (its
    # counter, and the transactions its counts stand for) instead of perf's samples. NULL and
    # '' before.
    25: added_columns_sql(25)
    + """
    ALTER TABLE run_profiles ADD COLUMN counter TEXT NOT NULL DEFAULT '';
    ALTER TABLE run_profiles ADD COLUMN transactions INTEGER;
    ALTER TABLE pgbench_profiles ADD COLUMN counter TEXT NOT NULL DEFAULT '';
    ALTER TABLE pgbench_profiles ADD COLUMN transactions INTEGER;
    """,
    # 26: what the server spent per committed transaction (CPU user and system, WAL, buffers,
    # context switches, instructions and cycles) and the totals with how each was read; a
    # group's member servers each theirs. NULL before: nothing was measured.
    26: added_columns_sql(26) + "ALTER TABLE run_servers ADD COLUMN costs_json TEXT;\n",
    # 27: a followed branch: each commit `follow` selected, what it is (hash, parent, subject,
    # author date, its place on the branch's first-parent line) and what became of it
    # (measured, or why not); its runs are the campaign it names.
    27: """
    CREATE TABLE follow_commits (
        follow TEXT NOT NULL,
        commit_hash TEXT NOT NULL,
        parent TEXT,
        position INTEGER NOT NULL,
        subject TEXT NOT NULL,
        author_date TEXT NOT NULL,
        source TEXT NOT NULL,
        branch TEXT NOT NULL,
        campaign TEXT NOT NULL,
        status TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        seconds REAL,
        measured_at REAL NOT NULL,
        PRIMARY KEY (follow, commit_hash)
    );
    """,
    # 28: the files an imported campaign (`pgbenchlab import`, status "imported") was read
    # from: each one's path under the imported directory, SHA-256, size, role (output, stderr,
    # log, unread), the run it gave and why it was not read. Campaigns run here: no rows.
    28: """
    CREATE TABLE imported_files (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        path TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        role TEXT NOT NULL,
        run_id INTEGER REFERENCES runs(id),
        note TEXT NOT NULL,
        PRIMARY KEY (campaign_id, path)
    );
    """,
    # 29: the connection pooler in front of a server (connection = "pgbouncer"): its kind,
    # version and the settings it was started with, once per campaign and server.
    29: """
    CREATE TABLE poolers (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        kind TEXT NOT NULL,
        version TEXT NOT NULL,
        settings_json TEXT NOT NULL,
        binary TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        PRIMARY KEY (campaign_id, server)
    );
    """,
    # 30: what a campaign set up around its servers: the tablespaces of each managed cluster
    # ([dataset] tablespace, index_tablespace, temp_tablespaces: name, location, what they
    # hold), and each one-off preparation ([[server]] prepare: the read-only run after a start
    # of the server, its length and TPS). Campaigns stored before it: none.
    30: """
    CREATE TABLE server_tablespaces (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        name TEXT NOT NULL,
        location TEXT NOT NULL,
        roles TEXT NOT NULL,
        PRIMARY KEY (campaign_id, server, name)
    );
    CREATE TABLE server_preparations (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        started_at REAL NOT NULL,
        workload TEXT NOT NULL,
        clients INTEGER NOT NULL,
        scale INTEGER NOT NULL,
        duration_s INTEGER NOT NULL,
        seconds REAL NOT NULL,
        tps REAL
    );
    """,
    # 31: how each run's dataset started ([dataset] reset): reused, made again by pgbench -i,
    # or restored from its snapshot (and whether by reflink or a plain copy). NULL before.
    31: added_columns_sql(31),
    # 32: a campaign's plan replaced by one that adds test sets (servers) to it: when, which
    # sets, and the plan (text, digest, files) it replaced; the campaign row holds the current
    # one. Campaigns stored before it, and those run under one plan: no rows.
    32: """
    CREATE TABLE plan_changes (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        changed_at REAL NOT NULL,
        added_json TEXT NOT NULL,
        plan_text TEXT NOT NULL,
        plan_digest TEXT NOT NULL,
        files_json TEXT NOT NULL
    );
    """,
    # 33: the cell a noise floor was measured in (its cell id): floors are measured per cell
    # (`restart = "each-round"`, `rebuild = N`); '' for a floor of the whole campaign.
    33: "ALTER TABLE noise_floors ADD COLUMN cell TEXT NOT NULL DEFAULT '';\n",
    # 34: what a group member's diagnosis read (its run as its own: TPS, per-second TPS, load
    # generators, telemetry) and the diagnosis' details, so that a change of the rules judges
    # the member again. Parts stored before it keep their verdict: every member verdict was
    # made by rules 3 (member verdicts came with schema 20, after rules 3, and the rules have
    # not changed since); with nothing stored to judge again, newer rules drop it.
    34: """
    ALTER TABLE run_servers ADD COLUMN details_json TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE run_servers ADD COLUMN observed_json TEXT;
    UPDATE run_servers SET details_json = '{"rules_version": 3}' WHERE verdict IS NOT NULL;
    """,
    # 35: the metrics a followed branch follows beyond the defaults (tps, p99, instructions per
    # transaction): `follow --metric` names any stored metric, and the site and the history
    # export read them from here. Follows stored before it: none (the defaults).
    35: """
    CREATE TABLE follow_metrics (
        follow TEXT NOT NULL,
        metric TEXT NOT NULL,
        PRIMARY KEY (follow, metric)
    );
    """,
}
