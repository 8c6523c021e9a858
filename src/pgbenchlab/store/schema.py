"""The results database's schema: one SQL migration per version, applied in order (the Python
steps some of them need are `store.backfills`). A migration, once released, never changes:
databases written by every earlier version must reach the current one.

The columns of `runs` are described by `pgbenchlab.store.columns`; migration 1 created those of
its day, and a later one adds its own with `columns.added_columns_sql`.
"""

from __future__ import annotations

from pgbenchlab.store.columns import added_columns_sql
from pgbenchlab.store.migrations import LATER

SCHEMA_VERSION = 35

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE campaigns (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        plan_path TEXT NOT NULL,
        plan_text TEXT NOT NULL,
        plan_digest TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        status TEXT NOT NULL DEFAULT 'running',
        pgbenchlab_version TEXT NOT NULL,
        pgbench_version TEXT,
        machine_json TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE servers (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        name TEXT NOT NULL,
        variant_json TEXT NOT NULL DEFAULT '{}',
        kind TEXT NOT NULL,
        version TEXT NOT NULL,
        version_num INTEGER NOT NULL,
        install TEXT,
        data_dir TEXT,
        settings_json TEXT NOT NULL,
        requested_json TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        UNIQUE (campaign_id, name, variant_json)
    );
    CREATE TABLE datasets (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        scale INTEGER NOT NULL,
        database TEXT NOT NULL,
        initialized_at REAL NOT NULL,
        init_seconds REAL,
        reused INTEGER NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        run_key TEXT NOT NULL,
        cell_id TEXT NOT NULL,
        sequence INTEGER NOT NULL,
        repeat INTEGER NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        server TEXT NOT NULL,
        server_settings_json TEXT NOT NULL,
        scale INTEGER NOT NULL,
        workload TEXT NOT NULL,
        clients INTEGER NOT NULL,
        threads INTEGER NOT NULL,
        protocol TEXT NOT NULL,
        duration_s INTEGER,
        transactions_per_client INTEGER,
        warmup_s INTEGER NOT NULL,
        rate REAL,
        latency_limit_ms REAL,
        connect INTEGER NOT NULL,
        vacuum TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        argv_json TEXT NOT NULL,
        pgbench_version TEXT NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL NOT NULL,
        tps REAL,
        transactions INTEGER,
        failed INTEGER,
        skipped INTEGER,
        late INTEGER,
        latency_avg_ms REAL,
        latency_stddev_ms REAL,
        lag_avg_ms REAL,
        lag_max_ms REAL,
        connection_time_ms REAL,
        p50_ms REAL, p90_ms REAL, p95_ms REAL, p99_ms REAL, p999_ms REAL,
        min_ms REAL, max_ms REAL,
        latency_source TEXT,
        latency_samples INTEGER,
        service_p50_ms REAL, service_p99_ms REAL, service_p999_ms REAL,
        warmup_tps REAL,
        client_cpu_s REAL,
        client_cpu_us_per_tx REAL,
        report_json TEXT NOT NULL,
        warnings_json TEXT NOT NULL,
        artifacts_json TEXT NOT NULL,
        result_schema INTEGER NOT NULL
    );
    CREATE INDEX runs_campaign ON runs (campaign_id, run_key);
    CREATE TABLE run_seconds (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        t INTEGER NOT NULL,
        tps REAL NOT NULL,
        latency_mean_ms REAL,
        latency_stddev_ms REAL,
        latency_min_ms REAL,
        latency_max_ms REAL,
        lag_ms REAL,
        skipped INTEGER,
        failed INTEGER,
        PRIMARY KEY (run_id, t)
    );
    CREATE TABLE run_histograms (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        kind TEXT NOT NULL,
        histogram_json TEXT NOT NULL,
        PRIMARY KEY (run_id, kind)
    );
    CREATE VIEW latest_runs AS
        SELECT r.* FROM runs r
        WHERE r.id = (SELECT max(id) FROM runs x
                      WHERE x.campaign_id = r.campaign_id AND x.run_key = r.run_key);
    """,
    # 2: telemetry. Per-second series and totals in a long format (one row per value, so a
    # new view or column needs no migration); a source a server version lacks has a
    # run_telemetry_sources row with available = 0 and no values: absent, never zero.
    2: """
    CREATE TABLE server_facts (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        server TEXT NOT NULL,
        fs_type TEXT,
        mount_options TEXT,
        device TEXT,
        storage_json TEXT,
        pg_config_json TEXT,
        fsync_ops_per_s REAL,
        fsync_json TEXT,
        recorded_at REAL NOT NULL,
        PRIMARY KEY (campaign_id, server)
    );
    CREATE TABLE run_telemetry (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        started_at REAL NOT NULL,
        duration_s REAL NOT NULL,
        server_version_num INTEGER,
        activity_rounds INTEGER NOT NULL,
        counter_rounds INTEGER NOT NULL,
        pgbench_threads INTEGER,
        host_cpus INTEGER,
        server_settings_json TEXT NOT NULL,
        errors_json TEXT NOT NULL
    );
    CREATE TABLE run_telemetry_sources (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        available INTEGER NOT NULL,
        note TEXT NOT NULL,
        PRIMARY KEY (run_id, source)
    );
    CREATE TABLE run_telemetry_seconds (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        metric TEXT NOT NULL,
        t INTEGER NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, source, metric, t)
    ) WITHOUT ROWID;
    CREATE TABLE run_telemetry_totals (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        metric TEXT NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, source, metric)
    ) WITHOUT ROWID;
    CREATE TABLE run_wait_events (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        wait_event_type TEXT NOT NULL,
        wait_event TEXT NOT NULL,
        samples INTEGER NOT NULL,
        PRIMARY KEY (run_id, wait_event_type, wait_event)
    );
    CREATE TABLE run_events (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        t REAL NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL,
        detail_json TEXT NOT NULL
    );
    CREATE INDEX run_events_run ON run_events (run_id, t);
    CREATE TABLE run_statements (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        rank INTEGER NOT NULL,
        queryid INTEGER NOT NULL,
        query TEXT NOT NULL,
        calls INTEGER NOT NULL,
        total_time_ms REAL NOT NULL,
        rows INTEGER NOT NULL,
        shared_blks_hit INTEGER NOT NULL,
        shared_blks_read INTEGER NOT NULL,
        shared_blks_written INTEGER NOT NULL,
        wal_bytes REAL,
        PRIMARY KEY (run_id, rank)
    );
    CREATE TABLE run_diagnosis (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        verdict TEXT NOT NULL,
        evidence_json TEXT NOT NULL,
        details_json TEXT NOT NULL
    );
    """,
    3: """
    ALTER TABLE campaigns ADD COLUMN description TEXT NOT NULL DEFAULT '';
    ALTER TABLE campaigns ADD COLUMN files_json TEXT NOT NULL DEFAULT '{}';
    """,
    # 4: the order of the plan's ordered axes (servers, server-setting values), so that a
    # series follows the plan without reading its TOML again.
    4: """
    ALTER TABLE campaigns ADD COLUMN axis_orders_json TEXT NOT NULL DEFAULT '{}';
    """,
    # 5: a server built from source carries its build: the cache key (what `builds --prune`
    # keeps) and its provenance. Older servers were never built: NULL, nothing to backfill.
    5: """
    ALTER TABLE servers ADD COLUMN build_key TEXT;
    ALTER TABLE servers ADD COLUMN build_json TEXT;
    """,
    # 6: the kernel tunables ([matrix.sysctl]) a run ran with, as read back after setting
    # them. Older runs set none: no rows.
    6: """
    CREATE TABLE run_sysctl (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    """,
    # 7: the probes of a capacity search: which stored run played which role at which offered
    # rate, and its verdict against the SLO (the search resumes from these).
    7: """
    CREATE TABLE capacity_probes (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        search TEXT NOT NULL,
        role TEXT NOT NULL,
        rate REAL,
        clients INTEGER NOT NULL,
        passed INTEGER NOT NULL,
        verdict TEXT NOT NULL,
        tps REAL
    );
    CREATE INDEX capacity_probes_search ON capacity_probes (campaign_id, search, run_id);
    """,
    # 8: the CPUs the kernel allowed the server's processes and pgbench during a run (read back
    # from /proc/PID/status), beside the CPU list the plan pinned them to. Older runs were not
    # checked: no rows.
    8: """
    CREATE TABLE run_affinity (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        role TEXT NOT NULL,
        requested TEXT,
        observed TEXT NOT NULL,
        processes INTEGER NOT NULL,
        verified INTEGER,
        PRIMARY KEY (run_id, role)
    );
    """,
    # 9: which hosts ran what: the server's host and the load generators' of each run. Older
    # runs all ran on the machine that ran the campaign: no rows, read as "local".
    9: """
    CREATE TABLE run_hosts (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        role TEXT NOT NULL,
        host TEXT NOT NULL,
        address TEXT NOT NULL,
        PRIMARY KEY (run_id, role, host)
    );
    """,
    # 10: how pgbench reached the server (socket, tcp, tls) and, over TLS, what it negotiated.
    # Runs stored before it all used the socket.
    10: added_columns_sql(10) + "UPDATE runs SET connection = 'socket';\n",
    # 11: a performance bisection: what was asked, the commits of its range, each step's
    # finding (its runs are the step campaigns', named NAME.STEP) and the answer.
    11: """
    CREATE TABLE bisections (
        name TEXT PRIMARY KEY,
        request_json TEXT NOT NULL,
        commits_json TEXT NOT NULL,
        steps_json TEXT NOT NULL DEFAULT '[]',
        status TEXT NOT NULL,
        answer_json TEXT,
        started_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    """,
    # 12: CPU profiles of profiled runs: folded stacks (zstd) rooted at each sample's backend
    # type, perf's frequency, samples and lost samples, and what the binary lacked.
    12: """
    CREATE TABLE run_profiles (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        frequency_hz INTEGER NOT NULL,
        samples INTEGER NOT NULL,
        lost INTEGER NOT NULL,
        target TEXT NOT NULL,
        symbols TEXT NOT NULL,
        complete_share REAL,
        seconds REAL,
        folded_zst BLOB NOT NULL
    );
    """,
    # 13: the kernel tunables of a run's cell in a column of their own, as its server settings
    # are (part of the report's server variant, exported); older runs get their cell's.
    13: added_columns_sql(13),
    # 14: where each run was made: the machine (host name) and, for a campaign run in shards
    # on several machines (`run --shard K/N`, joined by `merge`), which shard. Runs stored
    # before it have no row: made on the campaign's machine, unsharded.
    14: """
    CREATE TABLE run_origins (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        machine TEXT NOT NULL,
        shard TEXT
    );
    """,
    # 15: a run split across load generators: each one's share (clients, threads, -R rate),
    # --random-seed, usable CPUs, clock offset to this machine and start (this machine's
    # clock), and its own report's TPS, transactions and latency with its CPU time and busy
    # share. Runs with one generator: no rows.
    15: """
    CREATE TABLE run_generators (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        host TEXT NOT NULL,
        clients INTEGER NOT NULL,
        threads INTEGER NOT NULL,
        rate REAL,
        seed INTEGER NOT NULL,
        cpus INTEGER,
        clock_offset_s REAL NOT NULL,
        started_at REAL,
        tps REAL,
        transactions INTEGER,
        latency_avg_ms REAL,
        cpu_s REAL NOT NULL,
        busy REAL,
        PRIMARY KEY (run_id, host)
    );
    """,
    # 16: the CPU profile of a profiled run's pgbench process(es), beside the server's: the
    # same figures, stacks rooted at "pgbench".
    16: """
    CREATE TABLE pgbench_profiles (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        frequency_hz INTEGER NOT NULL,
        samples INTEGER NOT NULL,
        lost INTEGER NOT NULL,
        target TEXT NOT NULL,
        symbols TEXT NOT NULL,
        complete_share REAL,
        seconds REAL,
        folded_zst BLOB NOT NULL
    );
    """,
    # 17: a group's run (several servers driven together): each member server's part, its
    # pgbench's figures and the commits the server counted. Other runs: no rows.
    17: """
    CREATE TABLE run_servers (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        server TEXT NOT NULL,
        clients INTEGER NOT NULL,
        tps REAL,
        transactions INTEGER,
        failed INTEGER,
        latency_avg_ms REAL,
        server_commits INTEGER,
        commits_unexplained INTEGER,
        PRIMARY KEY (run_id, server)
    );
    """,
    # 18: what a server is, in the plan's words (a tuning test set: what changed).
    18: """
    ALTER TABLE servers ADD COLUMN description TEXT NOT NULL DEFAULT '';
    """,
    # 19: percentiles of the schedule lag of rate-limited runs (-R), from the log as the
    # latency's are (a run split across load generators: of the union of their logs).
    19: added_columns_sql(19),
    # 20: what limited each member server of a group's run: the verdict and evidence of the
    # diagnosis a single server's run gets, on the member's own telemetry and figures. Parts
    # stored before it: none.
    20: """
    ALTER TABLE run_servers ADD COLUMN verdict TEXT;
    ALTER TABLE run_servers ADD COLUMN evidence_json TEXT NOT NULL DEFAULT '[]';
    """,
    # 21: the shards of its plan a merged campaign lacks ("2/3": `merge` joined no results of
    # them), its status then "incomplete". Campaigns stored before it, and every campaign run on
    # one machine: none.
    21: """
    ALTER TABLE campaigns ADD COLUMN missing_shards_json TEXT NOT NULL DEFAULT '[]';
    """,
    # 22: how long the hygiene before each run took (its VACUUM, its CHECKPOINT); NULL before.
    22: added_columns_sql(22),
    **LATER,  # 23 on: `store.migrations`
}
