\set r random(1, 300)
SELECT 1 / (:r - 1);
