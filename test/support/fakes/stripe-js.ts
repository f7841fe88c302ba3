/**
 * A stand-in for https://js.stripe.com/v3/ with the documented surface the hosted page uses:
 * `Stripe(publishableKey)`, `stripe.elements({clientSecret})`, `elements.create('payment')`,
 * `element.mount(target)`, `element.on('change' | 'ready', handler)`,
 * `stripe.confirmPayment({elements, redirect, confirmParams: {return_url}})` and
 * `stripe.retrievePaymentIntent(clientSecret)`. Like Stripe.js it talks to its own origin's API
 * (the fake) with the publishable key and the client secret, form-encoded; unlike the real Payment
 * Element it draws its card inputs in the page rather than in an iframe.
 */
export const STRIPE_JS_STAND_IN = String.raw`
(function () {
  var origin = new URL(document.currentScript.src).origin;

  function encode(params, prefix) {
    var pairs = [];
    Object.keys(params).forEach(function (key) {
      var value = params[key];
      if (value === undefined || value === null) return;
      var name = prefix ? prefix + '[' + key + ']' : key;
      if (typeof value === 'object') pairs = pairs.concat(encode(value, name));
      else pairs.push(encodeURIComponent(name) + '=' + encodeURIComponent(String(value)));
    });
    return pairs;
  }

  function api(method, path, params) {
    var body = encode(params).join('&');
    var url = origin + path + (method === 'GET' ? '?' + body : '');
    return fetch(url, method === 'GET' ? {} : {
      method: method, headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: body,
    }).then(function (res) { return res.json().then(function (json) { return { status: res.status, json: json }; }); });
  }

  function intentId(clientSecret) { return String(clientSecret).split('_secret_')[0]; }

  function paymentElement() {
    var handlers = {};
    var inputs = null;
    var state = { complete: false, empty: true };
    function emit(type, event) { (handlers[type] || []).forEach(function (h) { h(event); }); }
    function field(name, label, placeholder, mode) {
      var wrap = document.createElement('label');
      wrap.className = 'StripeStandIn-field';
      wrap.style.cssText = 'display:flex;flex-direction:column;gap:4px;font-size:14px;flex:1;min-width:0';
      var input = document.createElement('input');
      input.name = name;
      input.placeholder = placeholder;
      input.inputMode = mode;
      input.autocomplete = 'off';
      input.style.cssText = 'font:inherit;padding:10px;border:1px solid #c6c6d0;border-radius:6px;min-width:0';
      wrap.append(label, input);
      return { wrap: wrap, input: input };
    }
    var element = {
      mount: function (target) {
        var container = typeof target === 'string' ? document.querySelector(target) : target;
        var number = field('cardnumber', 'Card number', '1234 1234 1234 1234', 'numeric');
        var expiry = field('exp-date', 'Expiration', 'MM / YY', 'numeric');
        var cvc = field('cvc', 'CVC', 'CVC', 'numeric');
        var root = document.createElement('div');
        root.className = 'StripeElement StripeStandIn';
        root.style.cssText = 'display:flex;flex-direction:column;gap:10px';
        var row = document.createElement('div');
        row.style.cssText = 'display:flex;gap:10px';
        row.append(expiry.wrap, cvc.wrap);
        root.append(number.wrap, row);
        container.replaceChildren(root);
        inputs = { number: number.input, expiry: expiry.input, cvc: cvc.input };
        root.addEventListener('input', function () {
          var digits = inputs.number.value.replace(/\s/g, '');
          state = {
            complete: /^\d{15,16}$/.test(digits) && /^\d\d\s*\/\s*\d\d$/.test(inputs.expiry.value) && /^\d{3,4}$/.test(inputs.cvc.value),
            empty: !digits && !inputs.expiry.value && !inputs.cvc.value,
          };
          emit('change', { elementType: 'payment', complete: state.complete, empty: state.empty, collapsed: false, value: { type: 'card' } });
        });
        setTimeout(function () { emit('ready', { elementType: 'payment' }); }, 0);
        return element;
      },
      on: function (type, handler) { (handlers[type] = handlers[type] || []).push(handler); return element; },
      focus: function () { if (inputs) inputs.number.focus(); },
      _card: function () { return inputs && { number: inputs.number.value.replace(/\s/g, ''), expiry: inputs.expiry.value, cvc: inputs.cvc.value }; },
      _state: function () { return state; },
    };
    return element;
  }

  window.Stripe = function Stripe(publishableKey) {
    if (!/^pk_/.test(String(publishableKey))) throw new Error('IntegrationError: Invalid value for Stripe(): apiKey should be a publishable key');
    function elements(options) {
      if (!options || typeof options.clientSecret !== 'string') throw new Error('IntegrationError: elements() needs a clientSecret');
      var created = null;
      return {
        _clientSecret: options.clientSecret,
        create: function (type) {
          if (type !== 'payment') throw new Error('IntegrationError: this stand-in knows only the payment element');
          created = paymentElement();
          return created;
        },
        getElement: function (type) { return type === 'payment' ? created : null; },
      };
    }
    function confirmPayment(options) {
      var els = options && options.elements;
      var element = els && els.getElement('payment');
      var returnUrl = options && options.confirmParams && options.confirmParams.return_url;
      if (!element) return Promise.reject(new Error('IntegrationError: confirmPayment needs the elements of a mounted payment element'));
      if (!element._state().complete) {
        var card = element._card() || { number: '' };
        var incomplete = !card.number ? ['incomplete_number', 'Your card number is incomplete.']
          : !/^\d\d\s*\/\s*\d\d$/.test(card.expiry) ? ['incomplete_expiry', "Your card's expiration date is incomplete."]
          : !/^\d{15,16}$/.test(card.number) ? ['incomplete_number', 'Your card number is incomplete.']
          : ['incomplete_cvc', "Your card's security code is incomplete."];
        return Promise.resolve({ error: { type: 'validation_error', code: incomplete[0], message: incomplete[1] } });
      }
      var secret = els._clientSecret;
      return api('POST', '/v1/payment_intents/' + intentId(secret) + '/confirm', {
        key: publishableKey, client_secret: secret, return_url: returnUrl,
        payment_method_data: { type: 'card', card: { number: element._card().number } },
      }).then(function (answer) {
        if (answer.json.error) return { error: answer.json.error };
        var intent = answer.json;
        if (intent.status === 'requires_action' && intent.next_action && intent.next_action.type === 'redirect_to_url') {
          window.location.assign(intent.next_action.redirect_to_url.url);
          return new Promise(function () {});
        }
        if (options.redirect !== 'if_required') {
          var back = new URL(returnUrl);
          back.searchParams.set('payment_intent', intent.id);
          back.searchParams.set('payment_intent_client_secret', secret);
          back.searchParams.set('redirect_status', 'succeeded');
          window.location.assign(back.toString());
          return new Promise(function () {});
        }
        return { paymentIntent: intent };
      }, function () {
        return { error: { type: 'api_connection_error', message: 'We could not connect to Stripe. Please check your connection and try again.' } };
      });
    }
    function retrievePaymentIntent(clientSecret) {
      return api('GET', '/v1/payment_intents/' + intentId(clientSecret), { key: publishableKey, client_secret: clientSecret })
        .then(function (answer) { return answer.json.error ? { error: answer.json.error } : { paymentIntent: answer.json }; });
    }
    return { elements: elements, confirmPayment: confirmPayment, retrievePaymentIntent: retrievePaymentIntent };
  };
})();
`;
