// A module hook for Node.js before 22 (node20.mjs): the conformance
// suite's import of fs.globSync gets a stand-in that throws if called.
export async function load(url, context, nextLoad) {
  const r = await nextLoad(url, context);
  if (url.includes('@modelcontextprotocol/conformance/dist/') && r.source) {
    let src = r.source.toString();
    src = src.replace(/import\{([^}]*)\}from"fs";/, (m, names) => {
      const parts = names.split(',');
      const keep = parts.filter(p => !p.startsWith('globSync'));
      const g = parts.find(p => p.startsWith('globSync'));
      const alias = g ? g.split(' as ')[1] : null;
      return `import{${keep.join(',')}}from"fs";` + (alias ? `const ${alias}=()=>{throw new Error("globSync needs Node 22")};` : '');
    });
    return { ...r, source: src };
  }
  return r;
}
