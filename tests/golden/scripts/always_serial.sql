BEGIN;
DO $$ BEGIN RAISE EXCEPTION 'always fails' USING ERRCODE = 'serialization_failure'; END $$;
END;
