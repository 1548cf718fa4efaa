// Unknown-field checking from the TypeScript declarations that kubernetes-models ships.
//
// The models' validate() checks types, required fields, enums and formats, but its schemas let
// unknown fields through, as the API server's OpenAPI schemas do; kubectl and the API server
// reject (or warn about) them. A misspelt field (`readinesProbe`) would otherwise pass every
// check and be dropped silently. The .d.ts files list every field of every type, so this reads
// them (interfaces, type aliases, imports, exports) and walks an object against them.

import fs from "node:fs";
import path from "node:path";

// The .d.ts of a bare module name ("pkg/sub/path", "@scope/pkg/sub"), found as Node finds
// packages (node_modules of each directory upwards); the packages' export maps hide .d.ts files
// from require.resolve.
export function packageFile(specifier, fromDir) {
  const parts = specifier.split("/");
  const nameLength = specifier.startsWith("@") ? 2 : 1;
  const name = parts.slice(0, nameLength).join("/");
  const sub = parts.slice(nameLength).join("/");
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "node_modules", name);
    if (fs.existsSync(candidate)) {
      if (sub) return path.join(candidate, sub + ".d.ts");
      const manifest = JSON.parse(fs.readFileSync(path.join(candidate, "package.json"), "utf8"));
      return path.join(candidate, manifest.types ?? manifest.typings ?? "index.d.ts");
    }
    if (dir === path.dirname(dir)) throw new Error(`cannot find package ${name}`);
  }
}
const PRIMITIVES = new Set([
  "string", "number", "boolean", "any", "unknown", "object", "null", "undefined", "never",
  "bigint", "symbol", "void", "Date",
]);

function tokenize(src) {
  const tokens = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) { i++; continue; }
    if (c === "/" && src[i + 1] === "*") { i = src.indexOf("*/", i + 2) + 2; continue; }
    if (c === "/" && src[i + 1] === "/") { while (i < src.length && src[i] !== "\n") i++; continue; }
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (src[j] !== c) j += src[j] === "\\" ? 2 : 1;
      tokens.push({ t: "str", v: src.slice(i + 1, j) });  // keys and literals have no escapes
      i = j + 1;
      continue;
    }
    const word = /^[A-Za-z_$][\w$]*/.exec(src.slice(i, i + 200));
    if (word) { tokens.push({ t: "id", v: word[0] }); i += word[0].length; continue; }
    const num = /^-?\d+(\.\d+)?/.exec(src.slice(i, i + 50));
    if (num) { tokens.push({ t: "num", v: num[0] }); i += num[0].length; continue; }
    if (src.startsWith("=>", i)) { tokens.push({ t: "p", v: "=>" }); i += 2; continue; }
    tokens.push({ t: "p", v: c });
    i++;
  }
  return tokens;
}

class Parser {
  constructor(tokens) { this.tokens = tokens; this.pos = 0; }
  peek(o = 0) { return this.tokens[this.pos + o]; }
  is(v, o = 0) { const t = this.peek(o); return t !== undefined && t.v === v && t.t !== "str"; }
  next() { return this.tokens[this.pos++]; }
  expect(v) {
    const t = this.next();
    if (!t || t.v !== v) throw new Error(`expected ${v}, got ${t ? t.v : "end"} at ${this.pos}`);
    return t;
  }
  // Skips to the end of a statement: a `;` at depth 0, or a closing brace that ends a block.
  skipStatement() {
    let depth = 0;
    while (this.pos < this.tokens.length) {
      const t = this.next();
      if (t.t !== "p") continue;
      if ("{([<".includes(t.v)) depth++;
      else if ("})]>".includes(t.v)) { depth--; if (depth === 0 && t.v === "}" && !this.is(";")) return; }
      else if (t.v === ";" && depth === 0) return;
    }
  }
  // <T extends X = Y, ...> after a declared name.
  skipTypeParameters() {
    if (!this.is("<")) return;
    let depth = 0;
    do {
      const t = this.next();
      if (t.v === "<") depth++;
      else if (t.v === ">") depth--;
    } while (depth > 0 && this.pos < this.tokens.length);
  }
  type() {
    if (this.is("|")) this.next();
    const types = [this.intersection()];
    while (this.is("|")) { this.next(); types.push(this.intersection()); }
    return types.length === 1 ? types[0] : { k: "union", types };
  }
  intersection() {
    const types = [this.postfix()];
    while (this.is("&")) { this.next(); types.push(this.postfix()); }
    return types.length === 1 ? types[0] : { k: "and", types };
  }
  postfix() {
    let node = this.primary();
    while (this.is("[")) {
      if (this.is("]", 1)) { this.next(); this.next(); node = { k: "arr", el: node }; }
      else { this.next(); this.type(); this.expect("]"); node = { k: "any" }; }  // T["x"]
    }
    return node;
  }
  primary() {
    const t = this.next();
    if (t.t === "str" || t.t === "num") return { k: "any" };
    if (t.v === "{") return this.members();
    if (t.v === "(") { const inner = this.type(); this.expect(")"); return inner; }
    if (t.t === "id") {
      if (t.v === "import") {  // import("module").Name
        this.expect("("); this.next(); this.expect(")");
        while (this.is(".")) { this.next(); this.next(); }
        return { k: "any" };
      }
      let name = t.v;
      while (this.is(".")) { this.next(); name += "." + this.next().v; }
      const args = [];
      if (this.is("<")) {
        this.next();
        args.push(this.type());
        while (this.is(",")) { this.next(); args.push(this.type()); }
        this.expect(">");
      }
      if (name === "Array" || name === "ReadonlyArray") return { k: "arr", el: args[0] };
      if (name === "Record") return { k: "obj", props: new Map(), index: args[1] };
      if (PRIMITIVES.has(name)) return { k: "any" };
      return { k: "ref", name, args };
    }
    throw new Error(`unexpected token ${t.v}`);
  }
  // After "{": members up to the matching "}".
  members() {
    const node = { k: "obj", props: new Map(), index: null };
    while (!this.is("}")) {
      if (this.is("readonly")) this.next();
      if (this.is("[")) {
        this.next(); this.next(); this.expect(":"); this.type(); this.expect("]");
        this.expect(":");
        node.index = this.type();
      } else {
        const key = this.next().v;
        if (this.is("?")) this.next();
        if (this.is("(")) { this.skipStatement(); continue; }  // a method
        this.expect(":");
        node.props.set(key, this.type());
      }
      if (this.is(";") || this.is(",")) this.next();
    }
    this.expect("}");
    return node;
  }
}

// One .d.ts file: its own declarations, what it imports and under which names it exports.
class DtsFile {
  constructor(file) {
    this.file = file;
    this.locals = new Map();   // name -> { node, parents }
    this.imports = new Map();  // local name -> { from, name }
    this.exports = new Map();  // exported name -> local name
    this.stars = [];           // modules re-exported whole: export * from "..."
    const p = new Parser(tokenize(fs.readFileSync(file, "utf8")));
    while (p.pos < p.tokens.length) {
      const t = p.peek();
      if (t.v === "import") {
        p.next();
        if (p.is("type")) p.next();
        if (!p.is("{")) { p.skipStatement(); continue; }
        p.next();
        while (!p.is("}")) {
          const name = p.next().v;
          let local = name;
          if (p.is("as")) { p.next(); local = p.next().v; }
          this.imports.set(local, { name });
          if (p.is(",")) p.next();
        }
        p.expect("}"); p.expect("from");
        const from = p.next().v;
        for (const entry of this.imports.values()) if (!entry.from) entry.from = from;
        if (p.is(";")) p.next();
        continue;
      }
      if (t.v === "export" && p.is("*", 1)) {
        p.next(); p.next();
        if (p.is("from")) { p.next(); this.stars.push(p.next().v); }
        if (p.is(";")) p.next();
        continue;
      }
      if (t.v === "export" && p.is("{", 1)) {
        p.next(); p.next();
        const entries = [];
        while (!p.is("}")) {
          const local = p.next().v;
          let name = local;
          if (p.is("as")) { p.next(); name = p.next().v; }
          entries.push([name, local]);
          if (p.is(",")) p.next();
        }
        p.expect("}");
        if (p.is("from")) {  // export { X as Y } from "module": Y is that module's X
          p.next();
          const from = p.next().v;
          for (const [name, local] of entries) {
            this.exports.set(name, name);
            this.imports.set(name, { name: local, from });
          }
        } else {
          for (const [name, local] of entries) this.exports.set(name, local);
        }
        if (p.is(";")) p.next();
        continue;
      }
      const start = p.pos;
      try {
        if (this.declaration(p)) continue;
      } catch {
        p.pos = start;  // a construct this reader does not know: skip the statement
      }
      p.skipStatement();
    }
  }

  // An interface or type alias at p; false when the statement is something else.
  declaration(p) {
    {
      let o = 0;
      if (p.is("export", o)) o++;
      if (p.is("declare", o)) o++;
      if (p.is("interface", o)) {
        p.pos += o + 1;
        const name = p.next().v;
        p.skipTypeParameters();
        const parents = [];
        if (p.is("extends")) {
          p.next();
          parents.push(p.type());
          while (p.is(",")) { p.next(); parents.push(p.type()); }
        }
        p.expect("{");
        this.locals.set(name, { node: p.members(), parents });
        this.exports.set(name, this.exports.get(name) ?? name);
        return true;
      }
      if (p.is("type", o)) {
        p.pos += o + 1;
        const name = p.next().v;
        p.skipTypeParameters();
        p.expect("=");
        const node = p.type();
        if (!p.is(";") && p.pos < p.tokens.length) throw new Error("not a plain type");
        if (p.is(";")) p.next();
        this.locals.set(name, { node, parents: [] });
        this.exports.set(name, this.exports.get(name) ?? name);
        return true;
      }
      return false;
    }
  }
}

export class DtsSchema {
  constructor() { this.files = new Map(); this.unresolved = new Set(); }

  load(file) {
    if (!this.files.has(file)) this.files.set(file, new DtsFile(file));
    return this.files.get(file);
  }

  moduleFile(from, fromFile) {
    if (from.startsWith(".")) return path.resolve(path.dirname(fromFile), from) + ".d.ts";
    return packageFile(from, path.dirname(fromFile));
  }

  // The type a name stands for in a file: a declaration of its own, or an import followed.
  lookup(file, name, depth = 0) {
    const dts = this.load(file);
    const local = dts.exports.has(name) && dts.locals.has(dts.exports.get(name))
      ? dts.exports.get(name) : name;
    if (dts.locals.has(local)) return { file, decl: dts.locals.get(local) };
    const imported = dts.imports.get(name) ?? dts.imports.get(local);
    if (imported && depth < 20) {
      try {
        return this.lookup(this.moduleFile(imported.from, file), imported.name, depth + 1);
      } catch { /* falls through to unresolved */ }
    }
    for (const star of dts.stars) {
      try {
        const starFile = this.moduleFile(star, file);
        if (!fs.existsSync(starFile)) continue;
        const before = this.unresolved.size;
        const found = this.lookup(starFile, name, depth + 1);
        if (found) return found;
        // A miss in one re-exported module is not yet a miss.
        if (this.unresolved.size > before) this.unresolved.delete(`${name} in ${starFile}`);
      } catch { /* try the next one */ }
    }
    this.unresolved.add(`${name} in ${file}`);
    return null;
  }

  // Object type nodes, with an interface's parents folded in; null for anything not an object.
  resolve(node, file, seen = 0) {
    if (!node || seen > 50) return { node: { k: "any" }, file };
    if (node.k === "ref") {
      const found = this.lookup(file, node.name);
      if (!found) return { node: { k: "any" }, file };
      const { decl } = found;
      if (decl.parents.length === 0) return this.resolve(decl.node, found.file, seen + 1);
      const props = new Map();
      let index = decl.node.index;
      for (const parent of decl.parents) {
        const r = this.resolve(parent, found.file, seen + 1);
        if (r.node.k === "obj") {
          for (const [k, v] of r.node.props) props.set(k, { node: v, file: r.file });
          index = index ?? r.node.index;
        }
      }
      for (const [k, v] of decl.node.props) props.set(k, { node: v, file: found.file });
      return { node: { k: "objx", props, index, indexFile: found.file }, file: found.file };
    }
    if (node.k === "and") {
      const props = new Map();
      for (const part of node.types) {
        const r = this.resolve(part, file, seen + 1);
        if (r.node.k === "obj") for (const [k, v] of r.node.props) props.set(k, { node: v, file: r.file });
        if (r.node.k === "objx") for (const [k, v] of r.node.props) props.set(k, v);
      }
      return { node: { k: "objx", props, index: null }, file };
    }
    return { node, file };
  }

  // Appends "PATH: unknown field" messages for every field the declarations do not have.
  check(value, node, file, where, errors) {
    const { node: n, file: f } = this.resolve(node, file);
    if (n.k === "any") return;
    if (n.k === "arr") {
      if (Array.isArray(value)) value.forEach((v, i) => this.check(v, n.el, f, `${where}[${i}]`, errors));
      return;
    }
    if (n.k === "union") {
      if (value === null || typeof value !== "object") return;
      let best = null;
      for (const branch of n.types) {
        const r = this.resolve(branch, f);
        if (!["obj", "objx", "arr"].includes(r.node.k)) continue;
        const branchErrors = [];
        this.check(value, branch, f, where, branchErrors);
        if (branchErrors.length === 0) return;
        if (!best || branchErrors.length < best.length) best = branchErrors;
      }
      if (best) errors.push(...best);
      return;
    }
    if (n.k !== "obj" && n.k !== "objx") return;
    if (value === null || typeof value !== "object" || Array.isArray(value)) return;
    for (const [key, v] of Object.entries(value)) {
      const here = `${where}.${key}`;
      if (n.props.has(key)) {
        const prop = n.props.get(key);
        if (n.k === "objx") this.check(v, prop.node, prop.file, here, errors);
        else this.check(v, prop, f, here, errors);
      } else if (n.index) {
        this.check(v, n.index, n.k === "objx" ? n.indexFile : f, here, errors);
      } else {
        errors.push(`${here}: unknown field "${key}"`);
      }
    }
  }

  // Checks a whole object against interface `name` of the declaration file `file`.
  checkObject(object, file, name) {
    const errors = [];
    this.check(object, { k: "ref", name, args: [] }, file, object.kind ?? "object", errors);
    return errors;
  }
}
