// tap `after`: stop the run's devnet (its anvils go down with it) and its PostgreSQL server.
import { existsSync } from 'node:fs';
import { readManifest } from '../../src/devnet/manifest.ts';
import { TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { stopSharedPostgres } from '../helpers/postgres.ts';
import { stopProcess } from '../helpers/temp-dir.ts';

await stopSharedPostgres();
if (existsSync(TEST_MANIFEST_PATH)) await stopProcess(readManifest(TEST_MANIFEST_PATH).pid);
