// The suite runs as CommonJS. Jest's ES-module mode (node --experimental-vm-modules) keeps every test
// file's modules alive after the file ends (measured: an empty test file leaves 4 MB behind, one that
// imports the backend 35 MB, a real one 60-100 MB; Node's vm.SourceTextModule, nodejs/node#63186), so a
// worker grows until it runs out of memory. As CommonJS, a file's modules go when it ends.
//
// swc compiles our TypeScript, and the packages that ship only ES modules (@noble/*, agenda, jose, ...),
// to CommonJS; `import.meta.url` becomes the module's file URL. CommonJS packages pass through untouched.
const { createHash } = require('node:crypto');
const { existsSync, readFileSync } = require('node:fs');
const { dirname, join } = require('node:path');
const swc = require('@swc/core');

/** This file's own text: a change to how files are compiled makes jest compile them again. */
const SELF = readFileSync(__filename, 'utf8');
/** package folder -> whether its .js files are ES modules ("type": "module"). */
const esmPackages = new Map();

function inEsmPackage(filename) {
  for (let dir = dirname(filename); ; dir = dirname(dir)) {
    if (esmPackages.has(dir)) return esmPackages.get(dir);
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      let esm = false;
      try { esm = JSON.parse(readFileSync(manifest, 'utf8')).type === 'module'; } catch { /* not a package manifest */ }
      esmPackages.set(dir, esm);
      return esm;
    }
    if (dirname(dir) === dir) return false;
  }
}

function isEsModule(filename) {
  if (filename.endsWith('.mjs')) return true;
  if (filename.endsWith('.cjs') || filename.endsWith('.json')) return false;
  return inEsmPackage(filename);
}

module.exports = {
  getCacheKey(source, filename) {
    return createHash('sha1').update(SELF).update(swc.version).update(filename).update('\0').update(source).digest('hex');
  },
  process(source, filename) {
    const typescript = filename.endsWith('.ts');
    if (!typescript && !isEsModule(filename)) return { code: source };
    // Not require('node:url'): a module may declare its own `require` (createRequire(import.meta.url)).
    const code = source.replace(/\bimport\.meta\.url\b/g, '("file://" + __filename.split("/").map(encodeURIComponent).join("/"))');
    const ours = !filename.includes('/node_modules/');
    const out = swc.transformSync(code, {
      filename,
      sourceMaps: ours ? 'inline' : false,
      jsc: {
        parser: typescript ? { syntax: 'typescript' } : { syntax: 'ecmascript', importAttributes: true },
        target: 'es2022',
        transform: { hidden: { jest: true } },
      },
      module: { type: 'commonjs' },
    });
    return { code: out.code };
  },
};
