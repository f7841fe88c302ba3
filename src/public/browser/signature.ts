// Signature pad: pointer strokes (mouse, touch, pen) on a canvas, or a typed name drawn in a
// handwriting font for people who cannot draw. Either way the value is a PNG data URL.
import type { Field } from '../../domain/forms/types';
import { domId, h } from './dom';
import { ControlParts, describedBy, FieldHooks, groupFrame } from './frame';
import { t } from './i18n';

interface Point { x: number; y: number }

/** Exported image size: small enough to stay far below the 256 KB signature limit. Strokes are kept
 * in 0..1 coordinates so they survive resizes. */
const EXPORT_WIDTH = 600;
const EXPORT_HEIGHT = 200;
const INK = '#111827';
const SCRIPT_FONT = '"Segoe Script", "Bradley Hand", "Brush Script MT", "URW Chancery L", cursive';

function draw(canvas: HTMLCanvasElement, strokes: Point[][], typed: string): void {
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = INK;
  ctx.fillStyle = INK;
  ctx.lineCap = 'round';
  ctx.lineJoin = 'round';
  ctx.lineWidth = Math.max(2, width / 240);
  if (typed) {
    ctx.font = `italic ${Math.round(height * 0.38)}px ${SCRIPT_FONT}`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.fillText(typed, width / 2, height / 2, width * 0.92);
    return;
  }
  for (const stroke of strokes) {
    ctx.beginPath();
    if (stroke.length === 1) {
      ctx.arc(stroke[0].x * width, stroke[0].y * height, ctx.lineWidth / 2, 0, Math.PI * 2);
      ctx.fill();
      continue;
    }
    stroke.forEach((p, i) => (i === 0 ? ctx.moveTo(p.x * width, p.y * height) : ctx.lineTo(p.x * width, p.y * height)));
    ctx.stroke();
  }
}

function exportPng(strokes: Point[][], typed: string): string {
  const canvas = document.createElement('canvas');
  canvas.width = EXPORT_WIDTH;
  canvas.height = EXPORT_HEIGHT;
  draw(canvas, strokes, typed);
  return canvas.toDataURL('image/png');
}

export function signatureControl(field: Field, on: FieldHooks): ControlParts {
  const noteId = domId(field.id, 'note');
  const typedId = domId(field.id, 'typed');
  const canvas = h('canvas', { class: 'fs-signature-pad', role: 'img', 'aria-label': t('signatureArea') });
  const clear = h('button', { type: 'button', class: 'fs-button fs-button--small fs-button--secondary' }, t('clear'));
  const typedInput = h('input', { id: typedId, type: 'text', class: 'fs-input', autocomplete: 'name', 'aria-describedby': describedBy(field, noteId) });
  const note = h('p', { class: 'fs-help', id: noteId },
    t('signatureHelp'));

  let strokes: Point[][] = [];
  let current: Point[] | null = null;
  let dataUrl: string | undefined;

  const typed = (): string => typedInput.value.trim();
  const redraw = (): void => draw(canvas, strokes, typed());
  const commit = (): void => {
    dataUrl = strokes.length || typed() ? exportPng(strokes, typed()) : undefined;
    on.changed(field);
  };
  const point = (event: PointerEvent): Point => {
    const box = canvas.getBoundingClientRect();
    return {
      x: Math.min(1, Math.max(0, (event.clientX - box.left) / box.width)),
      y: Math.min(1, Math.max(0, (event.clientY - box.top) / box.height)),
    };
  };

  canvas.addEventListener('pointerdown', (event) => {
    if (event.pointerType === 'mouse' && event.button !== 0) return;
    event.preventDefault();
    canvas.setPointerCapture(event.pointerId);
    typedInput.value = '';
    current = [point(event)];
    strokes.push(current);
    redraw();
  });
  canvas.addEventListener('pointermove', (event) => {
    if (!current) return;
    current.push(point(event));
    redraw();
  });
  const endStroke = (): void => {
    if (!current) return;
    current = null;
    commit();
  };
  canvas.addEventListener('pointerup', endStroke);
  canvas.addEventListener('pointercancel', endStroke);
  clear.addEventListener('click', () => {
    strokes = [];
    typedInput.value = '';
    redraw();
    commit();
  });
  typedInput.addEventListener('input', () => {
    strokes = [];
    redraw();
    commit();
  });

  // The backing store follows the displayed size (and pixel density) so lines stay crisp.
  new ResizeObserver(() => {
    const ratio = window.devicePixelRatio || 1;
    const width = Math.round(canvas.clientWidth * ratio);
    const height = Math.round(canvas.clientHeight * ratio);
    if (!width || !height || (width === canvas.width && height === canvas.height)) return;
    canvas.width = width;
    canvas.height = height;
    redraw();
  }).observe(canvas);

  const element = groupFrame(field,
    note,
    h('div', { class: 'fs-signature' }, canvas, h('div', { class: 'fs-signature-actions' }, clear)),
    h('label', { class: 'fs-sublabel', for: typedId }, t('typeYourName')),
    typedInput);
  return {
    element,
    targets: () => [typedInput],
    value: () => dataUrl,
    setValue: () => undefined,
    focus: () => typedInput.focus(),
  };
}
