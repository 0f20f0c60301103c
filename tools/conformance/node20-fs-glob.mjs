// The suite (0.2.x) imports globSync from fs, which Node 22 has and Node 20
// (this machine's, CI's) lacks: on Node 20 it does not even load. Preloaded
// with `node --import ./node20-fs-glob.mjs`, this module is fs plus a
// globSync backed by the glob package (pinned in package.json), and on a
// Node without fs.globSync a resolve hook hands it to every importer of fs.
// On a Node that has fs.globSync it changes nothing.
import fs from 'node:fs';
import { register } from 'node:module';
import { globSync as glob } from 'glob';

export * from 'node:fs';
export default fs;

// globSync supports what the suite passes (a pattern and options.cwd) and
// withFileTypes; fs.globSync's exclude is not mapped.
export function globSync(pattern, options = {}) {
  return glob(pattern, { cwd: options.cwd, withFileTypes: options.withFileTypes });
}

if (typeof fs.globSync !== 'function') {
  const self = JSON.stringify(import.meta.url);
  register('data:text/javascript,' + encodeURIComponent(`
    export async function resolve(specifier, context, next) {
      if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== ${self}) {
        return { url: ${self}, shortCircuit: true };
      }
      return next(specifier, context);
    }`));
}
