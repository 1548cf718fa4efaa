// Parses a WebVTT file with webvtt-parser (the W3C validator's parser) and exits 1 when it reports
// any error; otherwise prints the number of cues. Usage: node check.mjs FILE.vtt
import { readFileSync } from "node:fs";
import parserModule from "webvtt-parser";

const { WebVTTParser } = parserModule;
const text = readFileSync(process.argv[2], "utf8");
const tree = new WebVTTParser().parse(text, "metadata");
if (tree.errors.length > 0) {
  for (const error of tree.errors) console.error(`line ${error.line}: ${error.message}`);
  process.exit(1);
}
for (let i = 1; i < tree.cues.length; i++) {
  if (tree.cues[i].startTime < tree.cues[i - 1].startTime) {
    console.error(`cue ${i + 1} starts before cue ${i}`);
    process.exit(1);
  }
}
console.log(`${tree.cues.length} cues`);
