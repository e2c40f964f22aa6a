// Validates Kubernetes manifests offline against the Kubernetes API's schemas, as bundled in
// the kubernetes-models npm package (OpenAPI of the Kubernetes release it was generated from,
// compiled into validators; nothing is fetched).
//
//   node validate_manifests.js MODULES_DIR FILE.yaml... [--expect-invalid FILE.yaml...]
//
// MODULES_DIR holds node_modules with kubernetes-models and js-yaml (scripts/setup-kubernetes-
// validator installs them). Every document of every FILE must name an apiVersion and a kind
// the package knows and pass its schema (required fields, types, enums, formats) with no field
// its types do not declare (a misspelt key fails, which the schema alone lets pass); files after
// --expect-invalid must fail with an error that holds the text of their "# expect: TEXT" line
// (they check that the validator checks). Exit 0 when all is as
// expected, 1 otherwise.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const args = process.argv.slice(2);
if (args.length < 2) {
  console.error("usage: node validate_manifests.js MODULES_DIR FILE.yaml... [--expect-invalid FILE.yaml...]");
  process.exit(2);
}
const load = createRequire(path.join(path.resolve(args[0]), "package.json"));
const yaml = load("js-yaml");
const modelsVersion = load("kubernetes-models/package.json").version;

// apiVersion "v1" is kubernetes-models/v1, "apps/v1" kubernetes-models/apps/v1, ...
function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    throw new Error("no apiVersion or kind");
  }
  let group;
  try {
    group = load(`kubernetes-models/${apiVersion}`);
  } catch (e) {
    throw new Error(`apiVersion ${apiVersion} is unknown to kubernetes-models ${modelsVersion}`);
  }
  if (typeof group[kind] !== "function") {
    throw new Error(`kind ${kind} is not in ${apiVersion}`);
  }
  return group[kind];
}

// Unknown fields. Kubernetes' OpenAPI schemas do not forbid them (the API server drops or,
// with strict field validation, refuses them), so the schema check passes a misspelt field. The
// package's type declarations (.d.ts) list every field of every type: each object of a
// manifest is walked along them, and a key its type does not declare is an error.
const declarations = new Map(); // .d.ts file -> {imports, type}

function parseType(text) {
  let pos = 0;
  const skipSpace = () => {
    while (pos < text.length && /\s/.test(text[pos])) pos++;
  };
  const expect = (token) => {
    skipSpace();
    if (!text.startsWith(token, pos)) throw new Error(`expected ${token} at ${text.slice(pos, pos + 40)}`);
    pos += token.length;
  };
  function members() {
    const fields = new Map();
    let index = null;
    for (;;) {
      skipSpace();
      if (text[pos] === "}") {
        pos++;
        return { kind: "object", fields, index };
      }
      if (text[pos] === "[") {
        pos = text.indexOf("]", pos) + 1;
        expect(":");
        index = union();
      } else {
        const m = /^"([^"]*)"\??\s*:/.exec(text.slice(pos));
        if (!m) throw new Error(`cannot read a member at ${text.slice(pos, pos + 40)}`);
        pos += m[0].length;
        fields.set(m[1], union());
      }
      skipSpace();
      if (text[pos] === ";") pos++;
    }
  }
  function primary() {
    skipSpace();
    if (text.startsWith("Array<", pos)) {
      pos += "Array<".length;
      const element = union();
      expect(">");
      return { kind: "array", element };
    }
    if (text[pos] === "{") {
      pos++;
      return members();
    }
    const m = /^("[^"]*"|-?[0-9.]+|[A-Za-z_$][\w$]*(\["[^"]*"\])?)/.exec(text.slice(pos));
    if (!m) throw new Error(`cannot read a type at ${text.slice(pos, pos + 40)}`);
    pos += m[0].length;
    return /^[A-Z]/.test(m[0]) && !m[2] ? { kind: "ref", name: m[0] } : { kind: "leaf" };
  }
  function union() {
    const types = [primary()];
    for (;;) {
      skipSpace();
      if (text[pos] !== "|") break;
      pos++;
      types.push(primary());
    }
    return types.length === 1 ? types[0] : { kind: "leaf" };
  }
  return { parse: () => primary() };
}

function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const source = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const m of source.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) imports.set(m[1], m[2]);
  const body = /export interface \w+(?: extends [\w, ]+)? (\{[\s\S]*?\n\})/.exec(source);
  if (!body) throw new Error(`no interface in ${file}`);
  const entry = { file, imports, type: parseType(body[1]).parse() };
  declarations.set(file, entry);
  return entry;
}

function resolveRef(from, name) {
  const spec = from.imports.get(name);
  if (!spec) return null;
  const base = spec.startsWith(".") ? path.resolve(path.dirname(from.file), spec) : load.resolve(spec).replace(/\.js$/, "");
  return declaration(`${base}.d.ts`);
}

function unknownFields(value, type, from, where, out) {
  if (value === null || typeof value !== "object") return;
  if (type.kind === "ref") {
    const next = resolveRef(from, type.name);
    if (next) unknownFields(value, next.type, next, where, out);
  } else if (type.kind === "array" && Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, type.element, from, `${where}/${i}`, out));
  } else if (type.kind === "object" && !Array.isArray(value)) {
    for (const [key, v] of Object.entries(value)) {
      if (type.fields.has(key)) {
        unknownFields(v, type.fields.get(key), from, `${where}/${key}`, out);
      } else if (type.index) {
        unknownFields(v, type.index, from, `${where}/${key}`, out);
      } else {
        out.push(`${where}/${key}: unknown field (known: ${[...type.fields.keys()].join(", ")})`);
      }
    }
  }
}

function modelDeclaration(apiVersion, kind) {
  return declaration(load.resolve(`kubernetes-models/${apiVersion}/${kind}`).replace(/\.js$/, ".d.ts"));
}

function errorsOf(file) {
  const errors = [];
  let docs;
  try {
    docs = yaml.loadAll(fs.readFileSync(file, "utf8"));
  } catch (e) {
    return [`${file}: not YAML: ${e.message}`];
  }
  docs = docs.filter((d) => d !== null && d !== undefined);
  if (docs.length === 0) errors.push(`${file}: no document`);
  docs.forEach((doc, i) => {
    const where = `${file}: document ${i + 1} (${doc.kind || "?"} ${(doc.metadata && doc.metadata.name) || "?"})`;
    try {
      const Model = modelClass(doc.apiVersion, doc.kind);
      new Model(doc).validate();
      const unknown = [];
      const top = modelDeclaration(doc.apiVersion, doc.kind);
      unknownFields(doc, top.type, top, "", unknown);
      if (unknown.length > 0) throw new Error(unknown.join("; "));
    } catch (e) {
      errors.push(`${where}: ${e.message}`);
    }
  });
  return errors;
}

let failed = false;
let expectInvalid = false;
let checked = 0;
for (const file of args.slice(1)) {
  if (file === "--expect-invalid") {
    expectInvalid = true;
    continue;
  }
  checked++;
  const errors = errorsOf(file);
  if (!expectInvalid) {
    if (errors.length > 0) {
      failed = true;
      errors.forEach((e) => console.log(`INVALID ${e}`));
    } else {
      console.log(`valid   ${file}`);
    }
  } else {
    // The file's "# expect: TEXT" line: the refusal must say TEXT (refused for its reason).
    const m = /^# expect: (.+)$/m.exec(fs.readFileSync(file, "utf8"));
    const want = m ? m[1].trim() : null;
    if (errors.length === 0) {
      failed = true;
      console.log(`ACCEPTED ${file}, which must be refused: the validator does not check`);
    } else if (want === null || !errors.some((e) => e.includes(want))) {
      failed = true;
      console.log(`WRONG REASON ${file}: expected "${want}", got: ${errors.join("; ")}`);
    } else {
      console.log(`refused ${file} as expected: ${errors[0].slice(0, 200)}`);
    }
  }
}
console.log(`${checked} file(s) checked with kubernetes-models ${modelsVersion} on node ${process.version}`);
process.exit(failed ? 1 : 0);
