-- execkit state schema, step 14: runs accepted are counted once per batch.
--
-- The trigger count_accepted (step 11) updated the counter for each row,
-- and with it every insert into accepts ran a trigger program and a
-- statement journal: 15% of a batch accept's instructions.  The acceptor
-- (runs.c, acceptor_count()) now adds the batch's new runs to the counter
-- in the batch's own transaction, just before its commit: as exact after
-- a crash as the trigger was.
DROP TRIGGER count_accepted;
