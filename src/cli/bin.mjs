#!/usr/bin/env node
// The `gate402` command. TypeScript runs directly through tsx's loader: there is no build step to forget.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
