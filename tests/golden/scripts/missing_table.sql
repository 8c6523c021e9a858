SELECT count(*) FROM no_such_table;
