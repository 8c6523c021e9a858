\set bid random(1, 2)
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = :bid;
SELECT pg_sleep(0.001);
END;
