// The page for people: lists the models and classifies the video a person drops, through the
// server's REST endpoints only (docs/inference-protocol.md).
'use strict';

const $ = (id) => document.getElementById(id);

// The token the person typed, kept for this tab only.
const tokenInput = $('token');
tokenInput.value = sessionStorage.getItem('vidclf-token') || '';
tokenInput.addEventListener('change', () => {
  sessionStorage.setItem('vidclf-token', tokenInput.value.trim());
  loadModels();
});

// `path`'s answer as JSON; an error carries the server's message.
async function call(path, options = {}) {
  const headers = Object.assign({}, options.headers);
  const token = tokenInput.value.trim();
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, Object.assign({}, options, {headers}));
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch (notJson) {
    body = null;
  }
  if (!response.ok) {
    throw new Error(body && body.error ? body.error : `${response.status} ${response.statusText}`);
  }
  return body;
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

const tensors = (list) =>
  (list || []).map((t) => `${t.name} ${t.datatype} [${(t.shape || []).join(', ')}]`).join('\n');

async function loadModels() {
  const select = $('model');
  const tbody = $('models').tBodies[0];
  try {
    const server = await call('/v2');
    $('server').textContent = `${server.name} ${server.version}`;
    const index = await call('/v2/repository/index', {method: 'POST', body: '{}'});
    const chosen = select.value;
    select.replaceChildren();
    tbody.replaceChildren();
    for (const entry of index) {
      const [metadata, config] = await Promise.all([
        call(`/v2/models/${encodeURIComponent(entry.name)}`),
        call(`/v2/models/${encodeURIComponent(entry.name)}/config`),
      ]);
      select.add(new Option(metadata.name, metadata.name));
      const row = tbody.insertRow();
      cell(row, metadata.name);
      cell(row, (metadata.versions || []).join(', '));
      cell(row, tensors(metadata.inputs), 'tensors');
      cell(row, tensors(metadata.outputs), 'tensors');
      const delay = config.dynamic_batching?.max_queue_delay_microseconds;
      cell(row, delay === undefined ? '' : `${delay / 1000} ms`, 'number');
    }
    if (chosen) select.value = chosen;
  } catch (error) {
    $('server').textContent = `cannot list the models: ${error.message}`;
  }
}

function showError(message) {
  $('error').textContent = message;
  $('error').hidden = !message;
}

function showLabels(answer) {
  const tbody = $('labels').tBodies[0];
  tbody.replaceChildren();
  for (const entry of answer.top_k || []) {
    const row = tbody.insertRow();
    cell(row, entry.label, 'label');
    cell(row, (entry.score || 0).toFixed(3), 'number score');
    const bar = document.createElement('div');
    bar.style.width = `${Math.round(100 * (entry.score || 0))}%`;
    cell(row, '', 'bar').append(bar);
  }
  $('answered-by').textContent = `by ${answer.model} version ${answer.model_version}`;
}

function showTimings(timings = {}) {
  const tbody = $('timings').tBodies[0];
  tbody.replaceChildren();
  const stages = [['queue', 'queue_ms'], ['decode', 'decode_ms'], ['preprocess', 'preprocess_ms'],
    ['embed', 'embed_ms'], ['head', 'head_ms'], ['total', 'total_ms']];
  for (const [name, field] of stages) {
    const row = tbody.insertRow();
    cell(row, name);
    cell(row, `${(timings[field] || 0).toFixed(1)} ms`, 'number');
  }
}

// The frames the server used, drawn from the person's own copy of the video where this
// browser can play it; their times alone where it cannot.
async function showFrames(file, times) {
  const frames = $('frames');
  frames.replaceChildren();
  delete frames.dataset.shown;
  $('frame-count').textContent = `${times.length}`;
  const canvases = times.map((t) => {
    const figure = document.createElement('figure');
    const canvas = document.createElement('canvas');
    const caption = document.createElement('figcaption');
    caption.textContent = `${t.toFixed(2)} s`;
    figure.append(canvas, caption);
    frames.append(figure);
    return canvas;
  });
  const video = document.createElement('video');
  video.muted = true;
  video.preload = 'auto';
  const url = URL.createObjectURL(file);
  // Resolves as `name` fires; fails on the video's error, or after 5 s (a codec it lacks).
  const event = (name) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timeout')), 5000);
      const done = (settle) => () => { clearTimeout(timer); settle(); };
      video.addEventListener(name, done(resolve), {once: true});
      video.addEventListener('error', done(reject), {once: true});
    });
  try {
    video.src = url;
    await event('loadeddata');
    for (let i = 0; i < times.length; i++) {
      const seeked = event('seeked');
      video.currentTime = times[i];
      await seeked;
      const canvas = canvases[i];
      canvas.width = 240;
      canvas.height = Math.round(240 * video.videoHeight / Math.max(video.videoWidth, 1));
      canvas.getContext('2d').drawImage(video, 0, 0, canvas.width, canvas.height);
    }
    frames.dataset.shown = 'pictures';
  } catch (cannotPlay) {
    for (const canvas of canvases) canvas.hidden = true;
    frames.dataset.shown = 'times';
  } finally {
    URL.revokeObjectURL(url);
  }
}

async function classify(file) {
  showError('');
  $('result').hidden = true;
  const model = $('model').value;
  if (!model) {
    showError('No model to classify with: the server lists none (is a token needed?)');
    return;
  }
  const query = new URLSearchParams({top_k: $('top-k').value || '5'});
  if ($('num-frames').value) query.set('num_frames', $('num-frames').value);
  $('status').textContent = `Classifying ${file.name} (${(file.size / 1e6).toFixed(1)} MB)…`;
  try {
    const answer = await call(`/v2/models/${encodeURIComponent(model)}/classify?${query}`, {
      method: 'POST',
      headers: {'Content-Type': 'application/octet-stream'},
      body: file,
    });
    showLabels(answer);
    showTimings(answer.timings);
    $('result').hidden = false;
    $('status').textContent = `${file.name}: ${answer.top_k[0]?.label ?? 'no label'}`;
    await showFrames(file, answer.frame_timestamps_seconds || []);
  } catch (error) {
    $('status').textContent = '';
    showError(`${file.name}: ${error.message}`);
  }
}

const drop = $('drop');
$('file').addEventListener('change', (e) => {
  if (e.target.files.length) classify(e.target.files[0]);
});
drop.addEventListener('dragover', (e) => {
  e.preventDefault();
  drop.classList.add('over');
});
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  if (e.dataTransfer.files.length) classify(e.dataTransfer.files[0]);
});

loadModels();
