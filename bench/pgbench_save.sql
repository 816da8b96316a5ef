-- One human Save of a 4 KiB memory document, as memory.services.memory_save sends it (the
-- data-key read, then BEGIN, the version bump, the revision insert, the org's quota read
-- that a Save changing the document's length makes, COMMIT), for pgbench
-- (bench/bench_http_throughput.py). Client :client_id writes to its own workspace, so no two
-- clients touch one row. The 4,124 bytes of "ciphertext" (4 KiB sealed by AES-GCM) are made
-- by the server, and the version bump has no compare-and-set on a known base version.
\set workspace :first_workspace + :client_id
SELECT wrapped_key, wrapping_key_id, created_at, rewrapped_at, workspace_id
    FROM workspaces_workspacekey WHERE workspace_id = :workspace;
BEGIN;
UPDATE workspaces_file SET current_version = current_version + 1, updated_at = now()
    WHERE workspace_id = :workspace AND path = '.zudotext/memory/memory.md'
        AND deleted_at IS NULL
    RETURNING id AS file_id, current_version AS version,
        (SELECT size_bytes FROM workspaces_fileversion
            WHERE file_id = workspaces_file.id AND version = workspaces_file.current_version - 1)
            AS previous_bytes \gset
INSERT INTO workspaces_fileversion (file_id, version, ciphertext, ciphertext_sha256,
        size_bytes, author_kind, change_kind, author_id, created_at)
    VALUES (:file_id, :version, decode(repeat('5a', 4124), 'hex'), repeat('0', 64), 4096,
        'human', 'save', :author, now());
SELECT o.memory_quota_bytes FROM workspaces_org o JOIN workspaces_team t ON t.org_id = o.id
    WHERE t.id = :team FOR KEY SHARE OF o;
COMMIT;
