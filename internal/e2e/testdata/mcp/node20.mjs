// Loaded with --import on Node.js before 22: the conformance suite imports
// fs.globSync, which Node.js 22 added and which none of the server
// scenarios calls; node20-hook.mjs gives the import a stand-in that says so.
import { register } from 'node:module';

register('./node20-hook.mjs', import.meta.url);
