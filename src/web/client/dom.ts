/** The little DOM the pages need: find an element, make one, empty one. Text goes in as text, never as HTML. */

type Child = Node | string | null | undefined | false;

export interface ElementProps {
  class?: string;
  text?: string;
  title?: string;
  /** Attributes (`hidden`, `aria-*`, `data-*`, `href`...): a `false` or `undefined` value leaves one out. */
  attrs?: Record<string, string | boolean | undefined>;
  on?: { [K in keyof HTMLElementEventMap]?: (e: HTMLElementEventMap[K]) => void };
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: ElementProps = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.text !== undefined) node.textContent = props.text;
  if (props.title !== undefined) node.title = props.title;
  for (const [name, value] of Object.entries(props.attrs ?? {})) {
    if (value === true) node.setAttribute(name, '');
    else if (typeof value === 'string') node.setAttribute(name, value);
  }
  for (const [event, handler] of Object.entries(props.on ?? {})) node.addEventListener(event, handler as EventListener);
  for (const c of children) if (c !== null && c !== undefined && c !== false) node.append(c);
  return node;
}

/** The element with this id; a page whose markup lacks it is a bug worth a loud error. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (!node) throw new Error(`this page has no #${id}`);
  return node as T;
}

export function replaceChildren(node: Element, ...children: Child[]): void {
  node.replaceChildren(...children.filter((c): c is Node | string => c !== null && c !== undefined && c !== false));
}

/** The JSON the gateway put into the page (`<script type="application/json" id="gate402-config">`). */
export function pageConfig<T>(): T {
  return JSON.parse(byId('gate402-config').textContent ?? '{}') as T;
}
